// Package e2e proves the device lane's invariants end to end: the real lane
// (package lane, on a real SQLite store) and the real executor (package
// executor, running real processes on the real filesystem), in-process over
// loopback, with a fault-injecting proxy between them that drops the socket
// at every protocol step. Side effects are counted on disk, processes are
// checked in /proc, and the proxy counts every instruction frame the lane
// ever wrote and compares every re-sent chunk and result with its first
// send.
//
// Every test ends by checking, for its whole run: at most one instruction
// frame per instruction id (R1), retransmissions byte-identical (R6, R7),
// no process a test recorded still alive, and (goleak) no goroutine left.
//
// Knobs: SEMA_TEST_LOG=1 shows the lane's and the executor's logs;
// SEMA_E2E_SEED replays the random faults of the bulk and chaos tests (each
// logs its seed); SEMA_E2E_P sets their drop probability per frame.
package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Timings. Everything is short so that the package runs in seconds; nothing
// asserts a duration. The heartbeat is long enough that a loaded CI machine
// does not miss three in a row (which would be one more drop, not a failure,
// but would blur what a scenario tests).
const (
	heartbeat      = 500 * time.Millisecond
	reconnectGrace = 10 * time.Second
	waitLimit      = 30 * time.Second // the bound of every poll
	instrTimeout   = 20 * time.Second // an instruction's timeoutMs
)

// env is one lane replica on one store, one enrolled device, the proxy, and
// the executor runtime(s) serving that device through the proxy.
type env struct {
	t        *testing.T
	ctx      context.Context
	st       store.Store
	laneCfg  lane.Config
	srv      *lane.Server
	hs       *httptest.Server
	px       *proxy
	http     *http.Client
	apiKey   string
	deviceID string
	stateDir string
	ws       string // the workspace root: every side effect lands here
	key      ed25519.PrivateKey

	mu       sync.Mutex
	pidFiles []pidFile // every one a test made: checked dead at the end
	runners  []*runner
	servers  []*lane.Server
	hss      []*httptest.Server
}

// runner is one executor process: one Runtime, one epoch.
type runner struct {
	rt     *executor.Runtime
	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
}

func logger(t testing.TB) *slog.Logger {
	if os.Getenv("SEMA_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newEnv starts a lane on a fresh SQLite store, the proxy in front of it,
// and enrolls a device through the proxy. The executor is not started.
func newEnv(t *testing.T, mutate ...func(*lane.Config)) *env {
	t.Helper()
	// Registered first, so it runs last: once everything is stopped, no
	// goroutine this test started may be left.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	t.Cleanup(cancel)
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		t: t, ctx: ctx, st: st,
		http:     &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		stateDir: t.TempDir(),
		ws:       t.TempDir(),
	}
	e.laneCfg = lane.Config{
		Store:  st,
		Logger: logger(t),
		// The restarts here write off what is in flight at once: the
		// faults, not a deploy's grace, are under test.
		DrainGrace:        -1,
		HeartbeatInterval: heartbeat,
		LeaseTTL:          5 * time.Second,
		ReconnectGrace:    reconnectGrace,
		GapTimeout:        2 * time.Second,
		CancelGrace:       5 * time.Second,
		ExecutionGrace:    5 * time.Second,
		PayloadPartBytes:  4096, // a 64 KiB write is 16 parts: a payload to cut in the middle of
		MaxInflight:       8,
	}
	for _, m := range mutate {
		m(&e.laneCfg)
	}
	t.Cleanup(e.close)
	e.srv, e.hs = e.startLane()
	e.px = newProxy(t, e.hs.Listener.Addr().String())

	_, apiKey, err := lane.CreateIdentity(ctx, st, "user")
	if err != nil {
		t.Fatal(err)
	}
	e.apiKey = apiKey
	rec, err := device.Enroll(ctx, device.EnrollOptions{
		Server: e.px.URL(), Token: e.issueToken(), APIKey: apiKey, WorkspaceRoot: e.ws, StateDir: e.stateDir,
		HTTPClient: e.http, Logger: logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.deviceID = rec.DeviceID
	if e.key, err = device.LoadKey(e.stateDir); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) startLane() (*lane.Server, *httptest.Server) {
	e.t.Helper()
	srv, err := lane.New(e.laneCfg)
	if err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(srv))
	e.mu.Lock()
	e.servers = append(e.servers, srv)
	e.hss = append(e.hss, hs)
	e.mu.Unlock()
	return srv, hs
}

// drainLane shuts the current replica down.
func (e *env) drainLane() error {
	ctx, cancel := context.WithTimeout(e.ctx, waitLimit)
	defer cancel()
	if err := e.server().Shutdown(ctx); err != nil {
		return fmt.Errorf("lane Shutdown: %w", err)
	}
	return nil
}

// restartLane drains the current replica (Shutdown: bye draining, work in
// flight settled outcome_unknown) and starts a new one on the same store,
// behind the same proxy.
func (e *env) restartLane() {
	e.t.Helper()
	if err := e.drainLane(); err != nil {
		e.t.Fatal(err)
	}
	e.hs.Close()
	srv, hs := e.startLane()
	e.mu.Lock()
	e.srv, e.hs = srv, hs
	e.mu.Unlock()
	e.px.setTarget(hs.Listener.Addr().String())
}

// server is the current lane replica, for goroutines racing a restart.
func (e *env) server() *lane.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv
}

// close stops everything, executors first (a graceful goodbye), and checks
// that no process the executors started is left.
func (e *env) close() {
	e.mu.Lock()
	runners := append([]*runner(nil), e.runners...)
	e.mu.Unlock()
	for _, r := range runners {
		e.stopRunner(r)
	}
	// Nothing an executor started outlives it.
	e.mu.Lock()
	pfs := e.pidFiles
	e.mu.Unlock()
	for _, pf := range pfs {
		if live := anyAlive(pf.pids(e.t)); len(live) > 0 {
			e.t.Errorf("%v (%s) outlived the executor", live, filepath.Base(string(pf)))
		}
	}
	e.mu.Lock()
	servers, hss := e.servers, e.hss
	e.mu.Unlock()
	for _, s := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		if err := s.Shutdown(ctx); err != nil {
			e.t.Errorf("lane Shutdown: %v", err)
		}
		cancel()
	}
	for _, hs := range hss {
		hs.Close()
	}
	if e.px != nil {
		e.px.close()
		e.checkFramesOnce() // R1, for every test
		// R6, R7, §5.4: a retransmission repeats the first send exactly.
		for _, r := range e.px.retransmissions() {
			e.t.Errorf("a retransmission differs: %s", r)
		}
		if n := e.px.resends(); n > 0 {
			e.t.Logf("%d chunks and results were re-sent, each an exact copy", n)
		}
	}
	e.http.CloseIdleConnections()
	e.st.Close()
}

// executorConfig is the executor's configuration in these tests.
func (e *env) executorConfig() executor.Config {
	return executor.Config{
		DeviceID: e.deviceID, Key: e.key, Server: e.px.URL(), WorkspaceRoot: e.ws,
		Ops:        ops.Env{KillGrace: 200 * time.Millisecond},
		HTTPClient: e.http, Logger: logger(e.t),
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		ShutdownGrace: 300 * time.Millisecond, FlushTimeout: 300 * time.Millisecond,
	}
}

// startExecutor starts a new executor process: a new Runtime, a new epoch.
func (e *env) startExecutor(mutate ...func(*executor.Config)) *runner {
	e.t.Helper()
	cfg := e.executorConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	rt, err := executor.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{rt: rt, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- rt.Run(ctx) }()
	e.mu.Lock()
	e.runners = append(e.runners, r)
	e.mu.Unlock()
	return r
}

// stopRunner ends an executor process gracefully and waits for Run.
func (e *env) stopRunner(r *runner) error {
	e.t.Helper()
	r.cancel()
	return e.runEnd(r)
}

// runEnd waits for Run to return.
func (e *env) runEnd(r *runner) error {
	e.t.Helper()
	if r.ended {
		return r.err
	}
	select {
	case r.err = <-r.done:
		r.ended = true
		return r.err
	case <-time.After(waitLimit):
		e.t.Fatal("Run did not return")
		return nil
	}
}

// online waits until the device is connected and its generation is open
// for dispatch: the proxy has forwarded a generationAck on a connection
// the lane still holds, and that was opened after the last cut.
func (e *env) online() {
	e.t.Helper()
	eventually(e.t, "the device is online", func() bool {
		p := e.srv.Presence(e.deviceID)
		if !p.Online {
			return false
		}
		last := e.px.lastCutConn()
		conn := 0
		for _, f := range e.px.frames() {
			if f.Dir == toLane && f.T == "generationAck" && f.Gen == p.Gen.String() && f.Action == forward && f.Conn > last {
				conn = f.Conn
			}
		}
		// A connection that said goodbye, or was told bye, is on its way out.
		return conn > 0 && e.px.count(func(f frame) bool {
			return f.Conn == conn && (f.T == "goodbye" || f.T == "bye")
		}) == 0
	})
}

// eventually polls cond until it holds, or fails the test after waitLimit.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	delay := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// HTTP helpers for the management plane (through the proxy, like a client).

func (e *env) post(path string) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.px.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.apiKey)
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) issueToken() string {
	e.t.Helper()
	code, b := e.post("/v1/devices/enroll-tokens")
	var body struct{ Token string }
	if code != 200 || json.Unmarshal(b, &body) != nil {
		e.t.Fatalf("issue token: %d %s", code, b)
	}
	return body.Token
}

func (e *env) revoke() {
	e.t.Helper()
	if code, b := e.post("/v1/devices/" + e.deviceID + "/revoke"); code != 200 {
		e.t.Fatalf("revoke: %d %s", code, b)
	}
}

// Dispatch helpers.

func (e *env) dispatch(in lane.Instruction) *lane.Call {
	e.t.Helper()
	if in.Timeout == 0 {
		in.Timeout = instrTimeout
	}
	call, err := e.srv.Dispatch(e.ctx, e.deviceID, in)
	if err != nil {
		e.t.Fatal(err)
	}
	return call
}

func execInstr(cmd string) lane.Instruction {
	return lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: cmd}, Timeout: instrTimeout}
}

func writeInstr(path string, content []byte) lane.Instruction {
	return lane.Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: path}, Content: content, Timeout: instrTimeout}
}

// outcome is everything a caller got from one Call.
type outcome struct {
	chunks  []protocol.Chunk
	settled lane.Settlement
}

func (o outcome) stdout() string {
	var b strings.Builder
	for _, c := range o.chunks {
		if c.Kind == protocol.ChunkStdout || c.Kind == protocol.ChunkData {
			b.Write(c.Data)
		}
	}
	return b.String()
}

// ok reports a successful outcome.
func (o outcome) ok() bool { return o.settled.Outcome != nil && o.settled.Outcome.OK() }

// code is the failure's error code, or "".
func (o outcome) code() protocol.ErrorCode {
	if f, ok := o.settled.Outcome.(protocol.Failure); ok {
		return f.ErrorCode
	}
	return ""
}

func (o outcome) String() string {
	b, _ := json.Marshal(o.settled.Outcome)
	return fmt.Sprintf("%s %s (%d chunks)", o.settled.State, b, len(o.chunks))
}

// collect reads a call to its settlement, checking the stream invariant of
// §4 as the caller sees it: chunks contiguous from streamSeq 0, at most one
// exit chunk and nothing after it, and a successful exec outcome carries
// exactly one exit chunk, last, with its exit code. Anything else must have
// settled as a failure — never a silently truncated success.
func collect(t testing.TB, ctx context.Context, call *lane.Call) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	var o outcome
	for {
		ev, err := call.Next(ctx)
		if err != nil {
			t.Fatalf("call %s: %v", call.ID, err)
		}
		if ev.Settled != nil {
			o.settled = *ev.Settled
			break
		}
		o.chunks = append(o.chunks, *ev.Chunk)
	}
	if _, err := call.Next(ctx); err != io.EOF {
		t.Errorf("call %s: an event after the settlement (%v)", call.ID, err)
	}
	exits := 0
	for i, c := range o.chunks {
		if c.StreamSeq != int64(i) {
			t.Errorf("call %s: chunk %d has streamSeq %d: the stream is not contiguous from 0", call.ID, i, c.StreamSeq)
		}
		if c.Kind == protocol.ChunkExit {
			exits++
			if i != len(o.chunks)-1 {
				t.Errorf("call %s: the exit chunk is at %d of %d, not last", call.ID, i, len(o.chunks))
			}
		}
	}
	if exits > 1 {
		t.Errorf("call %s: %d exit chunks", call.ID, exits)
	}
	switch out := o.settled.Outcome.(type) {
	case nil:
		t.Errorf("call %s: settled without an outcome", call.ID)
	case protocol.ExecOutcome:
		if o.settled.State != protocol.StateTerminal {
			t.Errorf("call %s: a device outcome in state %s", call.ID, o.settled.State)
		}
		if exits != 1 {
			t.Errorf("call %s: a successful exec outcome with %d exit chunks", call.ID, exits)
		} else if last := o.chunks[len(o.chunks)-1]; last.ExitCode != out.ExitCode {
			t.Errorf("call %s: exit chunk %d, outcome %d", call.ID, last.ExitCode, out.ExitCode)
		}
	}
	if o.ok() && call.Kind.IsExec() && o.settled.Outcome.Kind() != protocol.OutcomeCancelled {
		if _, isExec := o.settled.Outcome.(protocol.ExecOutcome); !isExec {
			t.Errorf("call %s: an exec settled ok with %T", call.ID, o.settled.Outcome)
		}
	}
	return o
}

func (e *env) run(in lane.Instruction) outcome {
	e.t.Helper()
	return collect(e.t, e.ctx, e.dispatch(in))
}

// Side effects on the real filesystem.

// sidefx is a log file commands append one line to per execution step.
type sidefx string

func (e *env) sidefx(name string) sidefx { return sidefx(filepath.Join(e.ws, name+".log")) }

// cmd is a command that appends "start <tag>" to the log, runs body,
// then appends "end <tag>".
func (s sidefx) cmd(tag, body string) string {
	if body == "" {
		return fmt.Sprintf("echo 'start %s' >> %s; echo 'end %s' >> %s", tag, s, tag, s)
	}
	return fmt.Sprintf("echo 'start %s' >> %s; %s; echo 'end %s' >> %s", tag, s, body, tag, s)
}

// count counts the log's lines equal to line.
func (s sidefx) count(line string) int {
	b, err := os.ReadFile(string(s))
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

func (s sidefx) starts(tag string) int { return s.count("start " + tag) }
func (s sidefx) ends(tag string) int   { return s.count("end " + tag) }

// gate is a file a command waits for.
type gate string

func (e *env) gate(name string) gate { return gate(filepath.Join(e.ws, name+".gate")) }

func (g gate) wait() string {
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.01; done", g)
}

func (g gate) open(t testing.TB) {
	if err := os.WriteFile(string(g), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pidFile records the pids of a command: `echo $$ > f` for the shell and
// one line per background child.
type pidFile string

func (e *env) pidFile(name string) pidFile {
	pf := pidFile(filepath.Join(e.ws, name+".pids"))
	e.mu.Lock()
	e.pidFiles = append(e.pidFiles, pf)
	e.mu.Unlock()
	return pf
}

// longRunning is a command body that records the shell's pid and a
// background child's (same process group) and then waits for the gate.
func (p pidFile) longRunning(g gate) string {
	return fmt.Sprintf("sleep 60 & echo $! >> %s; echo $$ >> %s; %s", p, p, g.wait())
}

func (p pidFile) pids(t testing.TB) []int {
	t.Helper()
	b, err := os.ReadFile(string(p))
	if err != nil {
		return nil
	}
	var out []int
	for _, l := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("pid file %s: %q", p, l)
		}
		out = append(out, n)
	}
	return out
}

// waitPids waits until the command has recorded its two pids.
func (p pidFile) waitPids(t testing.TB) []int {
	t.Helper()
	eventually(t, "the command recorded its pids", func() bool { return len(p.pids(t)) == 2 })
	return p.pids(t)
}

// alive reports whether pid is a live process: it exists in /proc and is
// not a zombie (a zombie runs nothing; it only waits to be reaped).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

func anyAlive(pids []int) []int {
	var out []int
	for _, p := range pids {
		if alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// tempFiles lists staging files a write left in dir.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".sema-") || strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkWrite asserts a write's invariant: the file is whole with the
// expected digest, or it is absent (or, when it existed before, holds its
// old content untouched); and no staging file is left. It reports whether
// the new content landed.
func checkWrite(t testing.TB, path string, want, old []byte) bool {
	t.Helper()
	if tmp := tempFiles(t, filepath.Dir(path)); len(tmp) > 0 {
		t.Errorf("staging files left behind: %v", tmp)
	}
	got, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if old != nil {
			t.Errorf("%s: the old file is gone", path)
		}
		return false
	case err != nil:
		t.Fatal(err)
	}
	if sha256.Sum256(got) == sha256.Sum256(want) {
		return true
	}
	if old != nil && bytes.Equal(got, old) {
		return false
	}
	t.Errorf("%s: %d bytes that are neither the whole write (%d bytes) nor the old content", path, len(got), len(want))
	return false
}

// checkFramesOnce asserts R1 at the proxy: the lane wrote at most one
// instruction frame per instruction id, over every connection.
func (e *env) checkFramesOnce() {
	e.t.Helper()
	for id, n := range e.px.instructionFrames() {
		if n > 1 {
			e.t.Errorf("the lane wrote %d instruction frames for %s (R1: never re-sent)", n, id)
		}
	}
}

// framesFor counts the instruction frames the lane wrote for id.
func (e *env) framesFor(id string) int { return e.px.instructionFrames()[id] }

func content(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + (i*7+i/97)%26)
	}
	return b
}
