package executor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/lanetest"

	"go.uber.org/goleak"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// harness is one executor Runtime against one fake lane, on a fake clock.
type harness struct {
	t        *testing.T
	lane     *fakelane.Lane
	clock    *clock.Fake
	rt       *executor.Runtime
	deviceID string
	pub      ed25519.PublicKey
	ws       string // the workspace root
	status   string // the status file
	cancel   context.CancelFunc
	done     chan error
}

const hbMs = 15000

func newHarness(t *testing.T, mutate ...func(*executor.Config)) *harness {
	return startHarness(t, nil, mutate...)
}

// startHarness starts the runtime; the lane knows the device by lanePub, or
// by its real public key when lanePub is nil.
func startHarness(t *testing.T, lanePub ed25519.PublicKey, mutate ...func(*executor.Config)) *harness {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	h := &harness{t: t, lane: fakelane.New(t, ""), clock: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), deviceID: ids.New(ids.Device), pub: pub, ws: t.TempDir()}
	h.status = filepath.Join(t.TempDir(), "status.json")
	if lanePub == nil {
		lanePub = pub
	}
	h.lane.AddDevice(h.deviceID, lanePub)
	cfg := executor.Config{
		DeviceID: h.deviceID, Key: priv, Server: h.lane.URL(), WorkspaceRoot: h.ws,
		Clock: h.clock, Logger: testLogger(t), StatusPath: h.status,
		Jitter: func() float64 { return 0.999 },
		// Every other timer is longer than the backoff's 60 s cap, so the
		// tests can tell the reconnect timer apart (isBackoff).
		TimeoutBackstop: time.Hour, FenceWait: 2 * time.Minute,
		ShutdownGrace: 90 * time.Second, FlushTimeout: 100 * time.Second,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	rt, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.rt = rt
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- rt.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		h.lane.Close() // a graceful shutdown would wait for acks on the fake clock
		select {
		case <-h.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

// testLogger logs through t; set SEMA_TEST_LOG=1 to see it.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("SEMA_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(h.t.Context(), 20*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

// connect takes the next connection and completes the handshake.
func (h *harness) connect(gen protocol.Gen, pending []string, wm map[string]int64) *fakelane.Conn {
	h.t.Helper()
	c, err := h.lane.Next(h.ctx())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := c.Handshake(h.ctx(), gen, hbMs, pending, wm); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// reconnect drops c, lets the backoff elapse on the fake clock, and takes
// the next connection through helloAck and generationAck.
func (h *harness) reconnect(c *fakelane.Conn, gen protocol.Gen, pending []string, wm map[string]int64) *fakelane.Conn {
	h.t.Helper()
	c.Close()
	h.advanceBackoff()
	return h.connect(gen, pending, wm)
}

// advanceBackoff waits for the reconnect timer and lets it fire.
func (h *harness) advanceBackoff() time.Duration {
	h.t.Helper()
	d, ok := h.clock.WaitTimer(h.ctx(), isBackoff)
	if !ok {
		h.t.Fatal("no reconnect timer was armed")
	}
	h.clock.Advance(d)
	return d
}

// runErr waits for Run to return.
func (h *harness) runErr() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-h.ctx().Done():
		h.t.Fatal("Run did not return")
		return nil
	}
}

var seqID int

func newID() string { return ids.New(ids.Instruction) }

func execIn(gen protocol.Gen, id, cmd string, timeoutMs int64) *protocol.Instruction {
	return &protocol.Instruction{Gen: gen, InstructionID: id, RootSessionID: "ses_test", Kind: protocol.KindExec,
		Args: protocol.CommandArgs{Command: cmd}, TimeoutMs: timeoutMs}
}

// pidOf waits for the first stdout line of id (a command that starts with
// `echo $$`) and returns it as a pid.
func (h *harness) pidOf(id string) int {
	h.t.Helper()
	if err := h.lane.Ledger.WaitOutput(h.ctx(), id, "\n"); err != nil {
		h.t.Fatal(err)
	}
	line, _, _ := strings.Cut(h.lane.Ledger.Output(id, protocol.ChunkStdout), "\n")
	pid, err := strconv.Atoi(line)
	if err != nil {
		h.t.Fatalf("first line %q is not a pid", line)
	}
	return pid
}

// alive reports whether pid is a live process. A zombie is dead: it is
// only waiting for its parent (or an orphan for a non-reaping init) to
// reap it, and runs nothing.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// gate is a file a command waits for: `gate.wait` in the command, then
// open() lets it go on.
type gate string

func newGate(t *testing.T) gate { return gate(filepath.Join(t.TempDir(), "go")) }

func (g gate) wait() string {
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", g)
}

func (g gate) open(t *testing.T) {
	if err := os.WriteFile(string(g), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func outcomeOf(t *testing.T, r fakelane.ResultRecord) string {
	t.Helper()
	switch o := r.Outcome.(type) {
	case protocol.ExecOutcome:
		return fmt.Sprintf("exec:%d", o.ExitCode)
	case protocol.Failure:
		return "error:" + string(o.ErrorCode)
	case protocol.CancelledOutcome:
		return "cancelled:" + string(o.State)
	case nil:
		return "none"
	default:
		return string(o.Kind())
	}
}

// isBackoff tells the reconnect timer from the others the runtime arms:
// the heartbeat (15 s), the handshake deadline (5 s) and the cancel budget
// (9 s); the harness makes all others longer than a minute. With Jitter
// 0.999 no backoff is exactly one of those.
func isBackoff(d time.Duration) bool {
	switch d {
	case hbMs * time.Millisecond, protocol.HandshakeDeadline, 9 * time.Second:
		return false
	}
	return d >= time.Second && d <= time.Minute
}

// waitStatus polls the status file (a file has no notification) until cond.
func (h *harness) waitStatus(cond func(executor.Status) bool) executor.Status {
	h.t.Helper()
	ctx := h.ctx()
	for {
		st, err := executor.ReadStatus(h.status)
		if err == nil && cond(st) {
			return st
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("status never matched; last %+v, %v", st, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type fakelaneLedger = fakelane.Ledger

func withMaxResultSends(n int) func(*executor.Config) {
	return func(c *executor.Config) { c.MaxResultSends = n }
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitOutboxEmpty waits until the runtime holds nothing for the lane.
func (h *harness) waitOutboxEmpty() {
	h.t.Helper()
	ctx := h.ctx()
	for {
		if n, _ := h.rt.Held(); n == 0 && h.rt.Pending() == 0 {
			return
		}
		select {
		case <-ctx.Done():
			h.t.Fatal("the outbox never emptied")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

type contextT = context.Context
type executorStatus = executor.Status

func writeFileOS(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func issueTokenFor(t *testing.T, base, apiKey string) string {
	t.Helper()
	token, err := lanetest.IssueToken(t.Context(), base, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func revokeHTTP(t *testing.T, base, apiKey, deviceID string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/devices/"+deviceID+"/revoke", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
}
