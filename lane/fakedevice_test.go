package lane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// The WebSocket lane's test harness: a real lane (real HTTP, real SQLite,
// real WebSocket) on a fake clock, and a scripted fake device that signs its
// hello with a real Ed25519 key enrolled through the real HTTP plane.
//
// Nothing here sleeps to synchronise. Time moves only through wsLane.clk;
// an asynchronous effect is awaited with eventually (bounded polling) or
// with fakeDevice.barrier, which relies on the lane answering a frame of
// the socket in order.

// waitBound is the failure bound of every wait: reaching it fails the test;
// nothing waits for it to pass.
const waitBound = lanetest.WaitBound

var laneStart = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// defaultSupports is an honest executor without the presence-typed faces.
var defaultSupports = []protocol.InstructionKind{
	protocol.KindExec, protocol.KindExecStream, protocol.KindReadTextFile, protocol.KindReadTextLines,
	protocol.KindReadBinaryFile, protocol.KindWriteFile, protocol.KindAppendFile, protocol.KindFileInfo,
	protocol.KindListDir, protocol.KindCanonicalPath, protocol.KindExists, protocol.KindCreateDir,
	protocol.KindRemove, protocol.KindCreateTempDir, protocol.KindCreateTempFile,
}

// wsLane is a testLane whose WebSocket lane runs on a fake clock.
type wsLane struct {
	*testLane
	clk      *clock.Fake
	owner    store.Identity
	ownerKey string
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newWSLane(t testing.TB, mutate ...func(*Config)) *wsLane {
	t.Helper()
	clk := clock.NewFake(laneStart)
	base := func(c *Config) {
		c.Clock = clk
		c.Logger = quietLogger()
	}
	l := newTestLane(t, append([]func(*Config){base}, mutate...)...)
	owner, key := l.user("owner")
	return &wsLane{testLane: l, clk: clk, owner: owner, ownerKey: key}
}

func (l *wsLane) wsURL() string {
	return "ws" + strings.TrimPrefix(l.url, "http") + l.srv.cfg.WSPath
}

// device returns the lane's state for a device (nil if it has none).
func (l *wsLane) device(id string) *deviceState {
	l.srv.mu.Lock()
	defer l.srv.mu.Unlock()
	return l.srv.devices[id]
}

// current returns the device's current connection, or nil.
func (l *wsLane) current(id string) *conn {
	d := l.device(id)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}

// connState is the state of the device's current connection (connClosed if none).
func (l *wsLane) connState(id string) connState {
	d := l.device(id)
	if d == nil {
		return connClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn == nil {
		return connClosed
	}
	return d.conn.state()
}

// callState reads a call's state under its device's lock.
func (l *wsLane) callState(c *Call) protocol.InstructionState {
	d := l.srv.device(c.DeviceID)
	d.mu.Lock()
	defer d.mu.Unlock()
	return c.state
}

// auditReasons lists the reasons of the audit rows of an event ("" device
// matches every device).
func (l *wsLane) auditReasons(event, deviceID string) []string {
	l.t.Helper()
	var out []string
	for _, e := range l.auditRows(store.AuditFilter{Event: event, DeviceID: deviceID}) {
		for range e.Count { // identical refusals may be one row
			out = append(out, e.Reason)
		}
	}
	return out
}

// rejected lists the frame refusal reasons audited for a device.
func (l *wsLane) rejected(deviceID string) []string {
	return l.auditReasons(string(EventFrameRejected), deviceID)
}

// wantRejected waits until the refusal reasons for a device are exactly want.
func (l *wsLane) wantRejected(deviceID string, want ...string) {
	l.t.Helper()
	var got []string
	ok := poll(func() bool {
		got = l.rejected(deviceID)
		return slices.Equal(got, want)
	})
	if !ok {
		l.t.Fatalf("frame refusals audited for %q: %q, want %q", deviceID, got, want)
	}
}

// dispatch is Server.Dispatch that must not fail.
func (l *wsLane) dispatch(fd *fakeDevice, in Instruction) *Call {
	l.t.Helper()
	call, err := l.srv.Dispatch(l.t.Context(), fd.id, in)
	if err != nil {
		l.t.Fatalf("Dispatch: %v", err)
	}
	return call
}

func execInstr(command string) Instruction {
	return Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: command}, Timeout: 10 * time.Second}
}

// poll reports whether cond became true within waitBound.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// eventually waits, bounded, for an asynchronous effect.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

// settled waits, bounded, for a call's settlement.
func settled(t testing.TB, c *Call) Settlement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	s, err := c.Wait(ctx)
	if err != nil {
		t.Fatalf("call %s did not settle: %v", c.ID, err)
	}
	return s
}

// isSettled reports whether a call has settled, without waiting.
func isSettled(c *Call) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// wantFailure checks a settlement is a failure with the code.
func wantFailure(t testing.TB, s Settlement, state protocol.InstructionState, code protocol.ErrorCode) protocol.Failure {
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

// events drains a settled call's events: its chunks, then its settlement.
func events(t testing.TB, c *Call) ([]protocol.Chunk, Settlement) {
	t.Helper()
	var chunks []protocol.Chunk
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
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

// fakeDevice is a scripted executor.
type fakeDevice struct {
	t        testing.TB
	l        *wsLane
	id       string
	priv     ed25519.PrivateKey
	epoch    string
	supports []protocol.InstructionKind

	ws    *websocket.Conn
	nonce string
	gen   protocol.Gen
	ack   *protocol.HelloAck
	inbox lanetest.Inbox // what the socket received; frames read but not yet expected stay in it

	barrierID string
}

// enroll registers a new device of the owner straight in the registry, as
// enrolling it would, and returns its (not yet connected) executor.
func (l *wsLane) enroll(supports ...protocol.InstructionKind) *fakeDevice {
	l.t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		l.t.Fatal(err)
	}
	token := store.DigestOf("set_test_" + ids.ULID())
	if _, err := l.store.CreateEnrollToken(l.t.Context(), l.owner.ID, token, time.Hour); err != nil {
		l.t.Fatal(err)
	}
	dev, _, err := l.store.RegisterDevice(l.t.Context(), store.Registration{TokenDigest: token, IdentityID: l.owner.ID, PublicKey: pub,
		PlatformOS: "linux", PlatformArch: "amd64", DisplayName: "laptop", WorkspaceRoot: "/home/u/work"})
	if err != nil {
		l.t.Fatalf("enroll: %v", err)
	}
	if len(supports) == 0 {
		supports = defaultSupports
	}
	return &fakeDevice{t: l.t, l: l, id: dev.ID, priv: priv, epoch: ids.ULID(), supports: supports}
}

// restart is a new executor process on the same enrollment: a new epoch.
func (fd *fakeDevice) restart() { fd.epoch = ids.ULID() }

// dialRaw opens a socket to the lane without reading anything.
func (l *wsLane) dialRaw() (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, l.wsURL(), nil)
	if err == nil {
		ws.SetReadLimit(protocol.MaxFrameBytes)
		l.t.Cleanup(func() { ws.CloseNow() })
	}
	return ws, resp, err
}

// dial opens a socket and reads the challenge.
func (fd *fakeDevice) dial() *protocol.Challenge {
	fd.t.Helper()
	ws, resp, err := fd.l.dialRaw()
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		fd.t.Fatalf("dial: %v (status %d)", err, status)
	}
	fd.ws, fd.inbox, fd.gen, fd.ack = ws, lanetest.Inbox{WS: ws}, 0, nil
	f := fd.next()
	ch, ok := f.(*protocol.Challenge)
	if !ok {
		fd.t.Fatalf("the first frame is %s, want challenge", describe(f))
	}
	if ch.Nonce == "" || ch.ProtocolVersion != protocol.ProtocolVersion {
		fd.t.Fatalf("challenge %+v", ch)
	}
	fd.nonce = ch.Nonce
	return ch
}

// helloFrame is a correctly signed hello for the current socket.
func (fd *fakeDevice) helloFrame() *protocol.Hello {
	h := &protocol.Hello{
		ProtocolVersion: protocol.ProtocolVersion,
		DeviceID:        fd.id,
		Epoch:           fd.epoch,
		Platform:        protocol.Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "fake-1"},
		WorkspaceRoot:   "/home/u/work",
		PathFlavor:      "posix",
		Supports:        fd.supports,
	}
	fd.sign(h, fd.nonce)
	return h
}

// sign signs a hello over the §1.3 payload with the device key.
func (fd *fakeDevice) sign(h *protocol.Hello, nonce string) {
	fd.t.Helper()
	p, err := protocol.HelloSignaturePayload(nonce, h.DeviceID, h.Epoch, h.ProtocolVersion)
	if err != nil {
		fd.t.Fatal(err)
	}
	h.SignatureB64 = base64.StdEncoding.EncodeToString(ed25519.Sign(fd.priv, p))
}

// connect dials and says hello; it expects helloAck and returns it.
func (fd *fakeDevice) connect() *protocol.HelloAck {
	fd.t.Helper()
	fd.dial()
	fd.send(fd.helloFrame())
	return fd.expectHelloAck()
}

func (fd *fakeDevice) expectHelloAck() *protocol.HelloAck {
	fd.t.Helper()
	f := fd.next()
	ack, ok := f.(*protocol.HelloAck)
	if !ok {
		fd.t.Fatalf("hello answered %s, want helloAck", describe(f))
	}
	fd.gen, fd.ack = ack.Gen, ack
	return ack
}

// establish connects and sends generationAck, and waits until the lane has
// opened dispatch.
func (fd *fakeDevice) establish() *protocol.HelloAck {
	fd.t.Helper()
	ack := fd.connect()
	fd.send(&protocol.GenerationAck{Gen: ack.Gen})
	eventually(fd.t, "the lane processed generationAck", func() bool { return fd.l.connState(fd.id) == connActive })
	return ack
}

// expectReject expects helloReject with the code, then the socket's close.
func (fd *fakeDevice) expectReject(code protocol.HelloRejectCode) *protocol.HelloReject {
	fd.t.Helper()
	f := fd.next()
	r, ok := f.(*protocol.HelloReject)
	if !ok || r.Code != code {
		fd.t.Fatalf("hello answered %s, want helloReject %s", describe(f), code)
	}
	fd.expectClosed()
	return r
}

// drop closes the socket from the device's side and waits until the lane
// has cleaned up (its lease released).
func (fd *fakeDevice) drop() {
	fd.t.Helper()
	n := len(fd.l.auditReasons(string(EventDisconnected), fd.id))
	fd.ws.CloseNow()
	eventually(fd.t, "the lane noticed the drop", func() bool {
		return len(fd.l.auditReasons(string(EventDisconnected), fd.id)) > n
	})
}

// send writes a frame through the protocol encoder.
func (fd *fakeDevice) send(f protocol.DeviceFrame) {
	fd.t.Helper()
	b, err := f.MarshalJSON()
	if err != nil {
		fd.t.Fatalf("encoding %T: %v", f, err)
	}
	fd.sendRaw(websocket.MessageText, b)
}

// sendRaw writes any bytes as one message.
func (fd *fakeDevice) sendRaw(typ websocket.MessageType, b []byte) {
	fd.t.Helper()
	if err := fd.trySendRaw(typ, b); err != nil {
		fd.t.Fatalf("write: %v", err)
	}
}

func (fd *fakeDevice) trySendRaw(typ websocket.MessageType, b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	return fd.ws.Write(ctx, typ, b)
}

func (fd *fakeDevice) sendText(s string) { fd.t.Helper(); fd.sendRaw(websocket.MessageText, []byte(s)) }

func (fd *fakeDevice) result(id string, deviceSeq int64, o protocol.Outcome) {
	fd.t.Helper()
	fd.send(&protocol.Result{Gen: fd.gen, InstructionID: id, DeviceSeq: deviceSeq, Outcome: o})
}

func (fd *fakeDevice) chunk(id string, seq int64, kind protocol.ChunkKind, data string) {
	fd.t.Helper()
	fd.send(&protocol.Chunk{Gen: fd.gen, InstructionID: id, StreamSeq: seq, Kind: kind, Data: []byte(data)})
}

func (fd *fakeDevice) exit(id string, seq int64, code int) {
	fd.t.Helper()
	fd.send(&protocol.Chunk{Gen: fd.gen, InstructionID: id, StreamSeq: seq, Kind: protocol.ChunkExit, ExitCode: code})
}

// errTimeout is a read that reached waitBound: the socket is still open.
var errTimeout = lanetest.ErrNoFrame

// read reads one frame from the socket. Every frame the lane sends must
// pass the executor's own decoder.
func (fd *fakeDevice) read() (protocol.ServerFrame, error) {
	fd.t.Helper()
	return fd.inbox.Read(fd.t)
}

// next returns the oldest unexpected frame, or reads one.
func (fd *fakeDevice) next() protocol.ServerFrame {
	fd.t.Helper()
	return fd.inbox.Next(fd.t)
}

// expect returns the first frame of type T that matches (nil matches any),
// keeping every other frame for later.
func expect[T protocol.ServerFrame](fd *fakeDevice, match func(T) bool) T {
	fd.t.Helper()
	return lanetest.Expect(fd.t, &fd.inbox, match)
}

func (fd *fakeDevice) instruction() *protocol.Instruction {
	fd.t.Helper()
	return expect[*protocol.Instruction](fd, nil)
}

func (fd *fakeDevice) instructionFor(id string) *protocol.Instruction {
	fd.t.Helper()
	return expect(fd, func(in *protocol.Instruction) bool { return in.InstructionID == id })
}

func (fd *fakeDevice) expectResultAck(id string) {
	fd.t.Helper()
	a := expect(fd, func(a *protocol.ResultAck) bool { return a.InstructionID == id })
	if a.Gen != fd.gen {
		fd.t.Fatalf("resultAck stamped gen %s, want %s", a.Gen, fd.gen)
	}
}

func (fd *fakeDevice) expectChunkAck(id string, upTo int64) {
	fd.t.Helper()
	a := expect(fd, func(a *protocol.ChunkAck) bool { return a.InstructionID == id })
	if a.UpToStreamSeq != upTo || a.Gen != fd.gen {
		fd.t.Fatalf("chunkAck %s up to %d (gen %s), want up to %d (gen %s)", id, a.UpToStreamSeq, a.Gen, upTo, fd.gen)
	}
}

func (fd *fakeDevice) expectCancel(id string) *protocol.Cancel {
	fd.t.Helper()
	c := expect(fd, func(c *protocol.Cancel) bool { return c.InstructionID == id })
	if c.Gen != fd.gen {
		fd.t.Fatalf("cancel stamped gen %s, want %s", c.Gen, fd.gen)
	}
	return c
}

// expectClosed reads until the lane closes the socket and returns the read
// error; frames read on the way are kept.
func (fd *fakeDevice) expectClosed() error {
	fd.t.Helper()
	return fd.inbox.ExpectClosed(fd.t)
}

// answerExec runs an exec instruction to success: one exit chunk and the
// result, both acked.
func (fd *fakeDevice) answerExec(id string, code int) {
	fd.t.Helper()
	fd.exit(id, 0, code)
	fd.expectChunkAck(id, 0)
	fd.result(id, 0, protocol.ExecOutcome{ExitCode: code})
	fd.expectResultAck(id)
}

// barrier proves the lane has handled every frame sent before it: the lane
// answers a result that hits its settled memo with resultAck, synchronously
// and in order on the socket. It returns every frame read and not yet
// expected (they stay pending). The barrier's memo entry is planted the
// first time.
func (fd *fakeDevice) barrier() []protocol.ServerFrame {
	fd.t.Helper()
	if fd.barrierID == "" {
		fd.barrierID = ids.New(ids.Instruction)
		fd.l.srv.callsMu.Lock()
		fd.l.srv.memo.add(fd.barrierID, fd.id)
		fd.l.srv.callsMu.Unlock()
	}
	fd.result(fd.barrierID, 0, protocol.VoidOutcome{})
	expect(fd, func(a *protocol.ResultAck) bool { return a.InstructionID == fd.barrierID })
	return slices.Clone(fd.inbox.Pending)
}

// none fails if any frame matches.
func none[T protocol.ServerFrame](t testing.TB, frames []protocol.ServerFrame, what string, match func(T) bool) {
	t.Helper()
	lanetest.None(t, frames, what, match)
}

var describe = lanetest.Describe

// hookStore wraps the lane's store to block or fail chosen calls.
type hookStore struct {
	store.Store
	mu           sync.Mutex
	deviceHook   func(ctx context.Context, id string) error
	acquiredHook func(store.LeaseRequest) // runs after a lease was taken
	renewals     renewalCounts            // renewer_test.go
	leaseBatches []int                    // the size of each AcquireLeases call
	replica      replicaCalls             // replica_test.go
}

func (h *hookStore) Device(ctx context.Context, id string) (store.Device, error) {
	h.mu.Lock()
	hook := h.deviceHook
	h.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, id); err != nil {
			return store.Device{}, err
		}
	}
	return h.Store.Device(ctx, id)
}

// AcquireLeases runs the acquired hook after each lease its batch took
// (the lane takes its leases only through AcquireLeases, leasebatch.go).
func (h *hookStore) AcquireLeases(ctx context.Context, reqs []store.LeaseRequest) ([]store.LeaseOutcome, error) {
	out, err := h.Store.AcquireLeases(ctx, reqs)
	h.mu.Lock()
	h.leaseBatches = append(h.leaseBatches, len(reqs))
	hook := h.acquiredHook
	h.mu.Unlock()
	if hook != nil && err == nil {
		for i, o := range out {
			if o.Err == nil {
				hook(reqs[i])
			}
		}
	}
	return out, err
}

func (h *hookStore) setDeviceHook(f func(context.Context, string) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deviceHook = f
}

func (h *hookStore) setAcquiredHook(f func(store.LeaseRequest)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acquiredHook = f
}

// withHooks installs a hookStore in front of the lane's store.
func withHooks(h *hookStore) func(*Config) {
	return func(c *Config) {
		h.Store = c.Store
		c.Store = h
	}
}
