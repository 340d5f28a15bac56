package lane_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

// The rig of the spec's rule tests (§5), through the core's exported
// surface alone: a lane.Server on a fake clock, its WebSocket endpoint over
// in-memory pipes, devices registered straight in the registry, and a
// scripted executor that speaks protocol frames.
//
// Nothing sleeps; time moves only through rig.clk. Two facts of the lane
// order everything else:
//   - It handles one socket's frames in the order they came and answers a
//     result for an instruction it remembers as settled with resultAck at
//     once (§2.4). A device that has had one instruction settled (plant)
//     has a barrier: the answer to a result for it proves every frame sent
//     before it was handled.
//   - The last thing a connection's end does is its device.disconnected
//     audit row; the recording store sees the rows as they are written, so
//     a test waits on that row to know the lane has let the socket go.
//
// Timers of the lane run inside rig.clk.Advance, so what a timer does is
// done when Advance returns; the metrics count audit rows as they are made,
// so a timer's row is observable at once. A socket judged stale before its
// liveness timer ran (R13 superseded) needs that timer late: the lane's
// clock can hold its functions back (lateClock).

var rigStart = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// allKinds is an honest executor without the presence-typed faces.
var allKinds = []protocol.InstructionKind{
	protocol.KindExec, protocol.KindExecStream, protocol.KindReadTextFile, protocol.KindReadTextLines,
	protocol.KindReadBinaryFile, protocol.KindWriteFile, protocol.KindAppendFile, protocol.KindFileInfo,
	protocol.KindListDir, protocol.KindCanonicalPath, protocol.KindExists, protocol.KindCreateDir,
	protocol.KindRemove, protocol.KindCreateTempDir, protocol.KindCreateTempFile,
}

// recordingStore is the real registry, seen from the side: every audit row
// written through it is kept, and a waiter is woken on each write.
type recordingStore struct {
	store.Store
	mu      sync.Mutex
	rows    []store.AuditEvent
	changed chan struct{} // closed on the next write; nil until a waiter needs it
}

func (s *recordingStore) Audit(ctx context.Context, events ...store.AuditEvent) error {
	err := s.Store.Audit(ctx, events...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.rows = append(s.rows, events...)
	}
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return err
}

// DeviceRevocations passes the registry's count of revocations through, so
// that the lane takes the path it takes on the bare registry.
func (s *recordingStore) DeviceRevocations() (uint64, bool) {
	r, ok := s.Store.(interface{ DeviceRevocations() (uint64, bool) })
	if !ok {
		return 0, false
	}
	return r.DeviceRevocations()
}

// count is how many events of a device the rows written so far stand for.
func (s *recordingStore) count(event lane.EventName, deviceID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return countRows(s.rows, event, deviceID)
}

// reasons lists the reasons of a device's rows of an event, in order.
func (s *recordingStore) reasons(event lane.EventName, deviceID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.rows {
		if e.Event == string(event) && e.DeviceID == deviceID {
			out = append(out, e.Reason)
		}
	}
	return out
}

func countRows(rows []store.AuditEvent, event lane.EventName, deviceID string) int {
	n := 0
	for _, e := range rows {
		if e.Event == string(event) && e.DeviceID == deviceID {
			n += max(e.Count, 1)
		}
	}
	return n
}

// awaitRows waits until a device's rows of an event stand for at least n
// events; reaching coreWait fails the test.
func (s *recordingStore) awaitRows(t testing.TB, event lane.EventName, deviceID string, n int) {
	t.Helper()
	bound := time.NewTimer(coreWait)
	defer bound.Stop()
	for {
		s.mu.Lock()
		if countRows(s.rows, event, deviceID) >= n {
			s.mu.Unlock()
			return
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-bound.C:
			t.Fatalf("no %d %s rows for %s were written", n, event, deviceID)
		}
	}
}

// lateClock is the lane's fake clock, whose AfterFunc functions can be
// held back while time moves: a sweep that runs late, as a timer on a busy
// machine may. Unless held, it is the fake clock itself.
type lateClock struct {
	*clock.Fake
	mu   sync.Mutex
	late bool
	held []func()
}

func (c *lateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.Fake.AfterFunc(d, func() {
		c.mu.Lock()
		if c.late {
			c.held = append(c.held, f)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		f()
	})
}

// hold holds back the functions that fall due from now on.
func (c *lateClock) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.late = true
}

// release runs the held functions, late, in the order they fell due.
func (c *lateClock) release() {
	c.mu.Lock()
	held := c.held
	c.late, c.held = false, nil
	c.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// rig is a lane.Server on a fake clock, reached over pipes.
type rig struct {
	*lane.Server
	t        *testing.T
	clk      *clock.Fake
	late     *lateClock // clk as the lane's Config.Clock
	rec      *recordingStore
	pipes    *pipeListener
	owner    string // the identity the devices belong to
	ownerKey string // its API key
}

func newRig(t *testing.T, mutate ...func(*lane.Config)) *rig {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	owner, key, err := lane.CreateIdentity(t.Context(), st, "owner")
	if err != nil {
		t.Fatal(err)
	}
	return startRig(t, &recordingStore{Store: st}, owner.ID, key, mutate...)
}

// startRig starts a server on rec with a clock of its own.
func startRig(t *testing.T, rec *recordingStore, owner, ownerKey string, mutate ...func(*lane.Config)) *rig {
	t.Helper()
	late := &lateClock{Fake: clock.NewFake(rigStart)}
	// No drain grace: the fake clock would never end it.
	cfg := lane.Config{Store: rec, Clock: late, Logger: slog.New(slog.DiscardHandler), DrainGrace: -1}
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := lane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{Server: srv, t: t, clk: late.Fake, late: late, rec: rec, pipes: servePipes(t, srv), owner: owner, ownerKey: ownerKey}
}

// replica starts another lane server on the same registry, as a
// replacement replica (or the restarted single one) would.
func (r *rig) replica() *rig { return startRig(r.t, r.rec, r.owner, r.ownerKey) }

// dispatch is Dispatch that must not fail.
func (r *rig) dispatch(fe *fakeExecutor, in lane.Instruction) *lane.Call {
	r.t.Helper()
	call, err := r.Dispatch(r.t.Context(), fe.id, in)
	if err != nil {
		r.t.Fatalf("Dispatch: %v", err)
	}
	return call
}

// refusals is how many frames the lane refused, by reason.
func (r *rig) refusals() map[string]uint64 {
	got := map[string]uint64{}
	for _, c := range r.Metrics().Refusals {
		if c.Labels[0] == "frame" {
			got[c.Labels[1]] = c.Value
		}
	}
	return got
}

// wantRefused checks the frames refused so far are exactly want. The
// metrics count a refusal as the lane makes it, so after a barrier the
// count is complete.
func (r *rig) wantRefused(want ...string) {
	r.t.Helper()
	w := map[string]uint64{}
	for _, reason := range want {
		w[reason]++
	}
	if got := r.refusals(); !maps.Equal(got, w) {
		r.t.Fatalf("frames refused %v, want %v", got, w)
	}
}

// events is how many audit rows of an event the metrics counted.
func (r *rig) events(event lane.EventName) uint64 {
	var n uint64
	for _, c := range r.Metrics().Events {
		if c.Labels[0] == string(event) {
			n += c.Value
		}
	}
	return n
}

func execIn(command string) lane.Instruction {
	return lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: command}, Timeout: 10 * time.Second}
}

// settled waits, bounded, for a call's settlement.
func settled(t testing.TB, c *lane.Call) lane.Settlement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coreWait)
	defer cancel()
	s, err := c.Wait(ctx)
	if err != nil {
		t.Fatalf("call %s did not settle: %v", c.ID, err)
	}
	return s
}

// isSettled reports whether a call has settled, without waiting.
func isSettled(c *lane.Call) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// wantFailure checks a settlement is a failure with the code.
func wantFailure(t testing.TB, s lane.Settlement, state protocol.InstructionState, code protocol.ErrorCode) protocol.Failure {
	t.Helper()
	f, ok := s.Outcome.(protocol.Failure)
	if s.State != state || !ok || f.ErrorCode != code {
		t.Fatalf("settlement %s %#v, want %s with %s", s.State, s.Outcome, state, code)
	}
	if f.Message == "" {
		t.Fatalf("failure %s without a message", code)
	}
	return f
}

// callEvents drains a settled call's events: its chunks, then its settlement.
func callEvents(t testing.TB, c *lane.Call) ([]protocol.Chunk, lane.Settlement) {
	t.Helper()
	var chunks []protocol.Chunk
	ctx, cancel := context.WithTimeout(context.Background(), coreWait)
	defer cancel()
	for {
		e, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if e.Settled != nil {
			if _, err := c.Next(ctx); err != io.EOF {
				t.Fatalf("Next after the settlement: %v, want io.EOF", err)
			}
			return chunks, *e.Settled
		}
		chunks = append(chunks, *e.Chunk)
	}
}

// fakeExecutor is a scripted executor on one enrollment.
type fakeExecutor struct {
	t        testing.TB
	r        *rig
	id       string
	priv     ed25519.PrivateKey
	epoch    string
	supports []protocol.InstructionKind

	ws    *websocket.Conn
	inbox lanetest.Inbox // what the socket received; frames read but not yet expected stay in it
	nonce string
	gen   protocol.Gen

	barrierID string // a settled instruction of this device (plant)
}

// enroll registers a device of the owner straight in the registry and
// returns its (not yet connected) executor.
func (r *rig) enroll() *fakeExecutor {
	r.t.Helper()
	regs, err := lanetest.RegisterDevices(r.t.Context(), r.rec, r.owner, 1)
	if err != nil {
		r.t.Fatal(err)
	}
	return &fakeExecutor{t: r.t, r: r, id: regs[0].ID, priv: regs[0].Priv, epoch: ids.ULID(), supports: allKinds}
}

// restart is a new executor process on the same enrollment: a new epoch.
func (fe *fakeExecutor) restart() { fe.epoch = ids.ULID() }

// dialRaw opens a socket to the lane without reading anything.
func (r *rig) dialRaw() (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), coreWait)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: r.pipes.dial}}
	ws, resp, err := websocket.Dial(ctx, "ws://lane"+r.Config().WSPath, &websocket.DialOptions{HTTPClient: hc})
	if err == nil {
		ws.SetReadLimit(protocol.MaxFrameBytes)
		r.t.Cleanup(func() { ws.CloseNow() })
	}
	return ws, resp, err
}

// dial opens a socket and reads the challenge.
func (fe *fakeExecutor) dial() {
	fe.t.Helper()
	ws, resp, err := fe.r.dialRaw()
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		fe.t.Fatalf("dial: %v (status %d)", err, status)
	}
	fe.ws, fe.inbox, fe.gen = ws, lanetest.Inbox{WS: ws}, 0
	f := fe.next()
	ch, ok := f.(*protocol.Challenge)
	if !ok || ch.Nonce == "" || ch.ProtocolVersion != protocol.ProtocolVersion {
		fe.t.Fatalf("the first frame is %s, want a challenge", describe(f))
	}
	fe.nonce = ch.Nonce
}

// helloFrame is a correctly signed hello for the current socket (§1.3).
func (fe *fakeExecutor) helloFrame() *protocol.Hello {
	fe.t.Helper()
	h := &protocol.Hello{
		ProtocolVersion: protocol.ProtocolVersion, DeviceID: fe.id, Epoch: fe.epoch,
		Platform:      protocol.Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "fake-1"},
		WorkspaceRoot: "/w", PathFlavor: "posix", Supports: fe.supports,
	}
	p, err := protocol.HelloSignaturePayload(fe.nonce, h.DeviceID, h.Epoch, h.ProtocolVersion)
	if err != nil {
		fe.t.Fatal(err)
	}
	h.SignatureB64 = base64.StdEncoding.EncodeToString(ed25519.Sign(fe.priv, p))
	return h
}

// connect dials and says hello; it expects helloAck and returns it.
func (fe *fakeExecutor) connect() *protocol.HelloAck {
	fe.t.Helper()
	fe.dial()
	fe.send(fe.helloFrame())
	f := fe.next()
	ack, ok := f.(*protocol.HelloAck)
	if !ok {
		fe.t.Fatalf("hello answered %s, want helloAck", describe(f))
	}
	fe.gen = ack.Gen
	return ack
}

// establish connects and sends generationAck. The lane handles the
// socket's frames in order, so whatever the device sends next is handled
// on an open connection.
func (fe *fakeExecutor) establish() *protocol.HelloAck {
	fe.t.Helper()
	ack := fe.connect()
	fe.send(&protocol.GenerationAck{Gen: ack.Gen})
	return ack
}

// expectReject expects helloReject with the code, then the socket's close.
func (fe *fakeExecutor) expectReject(code protocol.HelloRejectCode) {
	fe.t.Helper()
	f := fe.next()
	if r, ok := f.(*protocol.HelloReject); !ok || r.Code != code {
		fe.t.Fatalf("hello answered %s, want helloReject %s", describe(f), code)
	}
	fe.expectClosed()
}

// drop closes the socket from the device's side and waits until the lane
// has let it go (its device.disconnected row is written last).
func (fe *fakeExecutor) drop() {
	fe.t.Helper()
	n := fe.r.rec.count(lane.EventDisconnected, fe.id)
	fe.ws.CloseNow()
	fe.r.rec.awaitRows(fe.t, lane.EventDisconnected, fe.id, n+1)
}

// supersede lets fe's socket go silent for 3 × H while the lane's liveness
// sweep runs late, so that the socket is stale but not yet closed, and
// takes the device over from it with a new socket (R13 superseded): a new
// executor process if restarted, else the same one. It returns the
// executor of the old socket, which the lane no longer hears as current.
func (fe *fakeExecutor) supersede(restarted bool) (old *fakeExecutor, ack *protocol.HelloAck) {
	fe.t.Helper()
	h := fe.r.Config().HeartbeatInterval
	fe.r.clk.Advance(3*h - time.Millisecond)
	fe.r.late.hold()
	fe.r.clk.Advance(time.Millisecond)
	o := *fe
	o.inbox.Pending = slices.Clone(fe.inbox.Pending)
	if restarted {
		fe.restart()
	}
	ack = fe.connect()
	fe.r.late.release()
	return &o, ack
}

// fence proves that the lane handled every frame sent before it on a
// socket it no longer answers: on a pipe a write returns only once the
// lane's reader has taken the message, and the reader takes the next
// message only after handling this one (a small frame is handled on the
// reading goroutine). The fence is a second hello, refused pre_hello if it
// is handled at all.
func (fe *fakeExecutor) fence() {
	fe.t.Helper()
	fe.send(fe.helloFrame())
}

// send writes a frame through the protocol encoder.
func (fe *fakeExecutor) send(f protocol.DeviceFrame) {
	fe.t.Helper()
	b, err := f.MarshalJSON()
	if err != nil {
		fe.t.Fatalf("encoding %T: %v", f, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coreWait)
	defer cancel()
	if err := fe.ws.Write(ctx, websocket.MessageText, b); err != nil {
		fe.t.Fatalf("write: %v", err)
	}
}

func (fe *fakeExecutor) result(id string, deviceSeq int64, o protocol.Outcome) {
	fe.t.Helper()
	fe.send(&protocol.Result{Gen: fe.gen, InstructionID: id, DeviceSeq: deviceSeq, Outcome: o})
}

func (fe *fakeExecutor) chunk(id string, seq int64, kind protocol.ChunkKind, data string) {
	fe.t.Helper()
	fe.send(&protocol.Chunk{Gen: fe.gen, InstructionID: id, StreamSeq: seq, Kind: kind, Data: []byte(data)})
}

func (fe *fakeExecutor) exit(id string, seq int64, code int) {
	fe.t.Helper()
	fe.send(&protocol.Chunk{Gen: fe.gen, InstructionID: id, StreamSeq: seq, Kind: protocol.ChunkExit, ExitCode: code})
}

// next returns the oldest frame not yet expected, or reads one.
func (fe *fakeExecutor) next() protocol.ServerFrame {
	fe.t.Helper()
	return fe.inbox.Next(fe.t)
}

// await returns the first frame of type T that matches (nil matches any),
// keeping every other frame for later.
func await[T protocol.ServerFrame](fe *fakeExecutor, match func(T) bool) T {
	fe.t.Helper()
	return lanetest.Expect(fe.t, &fe.inbox, match)
}

func (fe *fakeExecutor) instruction() *protocol.Instruction {
	fe.t.Helper()
	return await[*protocol.Instruction](fe, nil)
}

func (fe *fakeExecutor) instructionFor(id string) *protocol.Instruction {
	fe.t.Helper()
	return await(fe, func(in *protocol.Instruction) bool { return in.InstructionID == id })
}

func (fe *fakeExecutor) expectResultAck(id string) {
	fe.t.Helper()
	if a := await(fe, func(a *protocol.ResultAck) bool { return a.InstructionID == id }); a.Gen != fe.gen {
		fe.t.Fatalf("resultAck stamped gen %s, want %s", a.Gen, fe.gen)
	}
}

func (fe *fakeExecutor) expectChunkAck(id string, upTo int64) {
	fe.t.Helper()
	a := await(fe, func(a *protocol.ChunkAck) bool { return a.InstructionID == id })
	if a.UpToStreamSeq != upTo || a.Gen != fe.gen {
		fe.t.Fatalf("chunkAck %s up to %d (gen %s), want up to %d (gen %s)", id, a.UpToStreamSeq, a.Gen, upTo, fe.gen)
	}
}

func (fe *fakeExecutor) expectCancel(id string) {
	fe.t.Helper()
	if c := await(fe, func(c *protocol.Cancel) bool { return c.InstructionID == id }); c.Gen != fe.gen {
		fe.t.Fatalf("cancel stamped gen %s, want %s", c.Gen, fe.gen)
	}
}

// expectClosed reads until the lane closes the socket; frames read on the
// way are kept.
func (fe *fakeExecutor) expectClosed() {
	fe.t.Helper()
	fe.inbox.ExpectClosed(fe.t)
}

// answerExec runs an exec instruction to success: one exit chunk and the
// result, both acked.
func (fe *fakeExecutor) answerExec(id string, code int) {
	fe.t.Helper()
	fe.exit(id, 0, code)
	fe.expectChunkAck(id, 0)
	fe.result(id, 0, protocol.ExecOutcome{ExitCode: code})
	fe.expectResultAck(id)
}

// plant runs one instruction to its settlement on an open connection with
// a free slot, so that the lane remembers it as settled: the barrier's
// instruction from then on, while the settled memo keeps it.
func (fe *fakeExecutor) plant() {
	fe.t.Helper()
	call := fe.r.dispatch(fe, execIn("true"))
	fe.instructionFor(call.ID)
	fe.answerExec(call.ID, 0)
	settled(fe.t, call)
	fe.barrierID = call.ID
}

// barrier proves the lane has handled every frame sent before it: it
// answers a result for a settled instruction with resultAck, at once and in
// order on the socket. It returns every frame read and not yet expected
// (they stay pending).
func (fe *fakeExecutor) barrier() []protocol.ServerFrame {
	fe.t.Helper()
	if fe.barrierID == "" {
		fe.t.Fatal("barrier before plant")
	}
	fe.result(fe.barrierID, 0, protocol.VoidOutcome{})
	await(fe, func(a *protocol.ResultAck) bool { return a.InstructionID == fe.barrierID })
	return slices.Clone(fe.inbox.Pending)
}

// none fails if any frame matches.
func none[T protocol.ServerFrame](t testing.TB, frames []protocol.ServerFrame, what string, match func(T) bool) {
	t.Helper()
	lanetest.None(t, frames, what, match)
}

var describe = lanetest.Describe

// connected is the rules' common given: a rig and a device of it whose
// connection is open, its barrier planted.
func connected(t *testing.T, mutate ...func(*lane.Config)) (*rig, *fakeExecutor) {
	t.Helper()
	r := newRig(t, mutate...)
	fe := r.enroll()
	fe.establish()
	fe.plant()
	return r, fe
}

// start dispatches an instruction and reads its frame: it is in flight.
func (fe *fakeExecutor) start(in lane.Instruction) *lane.Call {
	fe.t.Helper()
	call := fe.r.dispatch(fe, in)
	fe.instructionFor(call.ID)
	return call
}
