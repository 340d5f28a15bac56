package lane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/wsmsg"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// conn is one WebSocket from a device. The handler goroutine that accepted
// it owns it: it reads the socket and, in cleanup, waits for the write loop
// (writer.go), which the first frame queued starts; everything else only
// queues frames. Its state machine is connstate.go.
type conn struct {
	srv    *Server
	ws     *websocket.Conn
	holder string // the lease holder id of this connection
	remote string
	nonce  string

	phase       connPhase      // moves only through step (connstate.go)
	handshaking sync.WaitGroup // the hello's verification, while it runs
	payloads    sync.WaitGroup // the write payloads it sends (send.go); cleanup waits for them last
	inPreAuth   bool           // counted against the pre-auth caps
	preAuthLeft atomic.Bool    // the pre-auth slot was released
	lastFrame   atomic.Int64   // unix nanoseconds on the lane clock

	// Set by the handshake before the attach, then read-only. dev is
	// stored just before the attach moves the state, so whoever sees an
	// attached state sees the device. attached says the attach took (the
	// deadline can still prevent it); cleanup reads it once the handshake
	// goroutine that set it has ended.
	dev         atomic.Pointer[deviceState]
	attached    bool
	deviceID    string
	epoch       string
	supports    map[protocol.InstructionKind]bool
	connectedAt time.Time
	// record is the device's registry row as the handshake read it, not
	// revoked; recordAt is the registry's revocation count read before it
	// (see Server.dispatchDevice).
	record   store.Device
	recordAt uint64
	recorded bool
	// leaseRound is the renewal round under way when the lease was taken.
	leaseRound uint64

	// Under dev.mu.
	gen          protocol.Gen
	issuedSeq    int64
	liveness     clock.Timer
	goodbyeTimer clock.Timer

	w         writer
	closeOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
}

// state is the connection's state; under dev.mu it is stable once the
// connection is attached (every later event is applied under dev.mu).
func (c *conn) state() connState { return c.phase.load() }

// to applies an event the lane itself raises; an illegal one is a bug in
// the lane, logged loudly, and the state does not move.
func (c *conn) to(ev connEvent) (from, next connState, err error) {
	from, next, err = c.phase.to(ev)
	if err != nil {
		c.srv.log.Error("lane: an illegal connection transition was refused", "device", c.deviceID, "err", err)
	}
	return from, next, err
}

// frameMarshaler is any frame of either direction.
type frameMarshaler interface{ MarshalJSON() ([]byte, error) }

func (c *conn) touch() { c.lastFrame.Store(c.srv.cfg.Clock.Now().UnixNano()) }

// livenessLimit is H × 3 (R14).
func (c *conn) livenessLimit() time.Duration { return 3 * c.srv.cfg.HeartbeatInterval }

// silence is how long no frame came.
func (c *conn) silence() time.Duration {
	return c.srv.cfg.Clock.Now().Sub(time.Unix(0, c.lastFrame.Load()))
}

// stale reports whether no frame came for three heartbeat intervals (R14).
func (c *conn) stale() bool { return c.silence() >= c.livenessLimit() }

func (c *conn) auditFrame(reason string) {
	c.srv.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: string(EventFrameRejected), Reason: reason, RemoteAddr: c.remote})
}

// auditPreAuthFrame audits a frame refused before the handshake completed.
// No device is verified yet (and the handshake goroutine may be writing
// c.deviceID), so the row names none.
func (c *conn) auditPreAuthFrame(reason string) {
	c.srv.audit(c.ctx, store.AuditEvent{Event: string(EventFrameRejected), Reason: reason, RemoteAddr: c.remote})
}

// serve runs one socket from open to close: challenge, handshake, frames.
func (c *conn) serve() {
	defer c.cleanup()
	nonce := make([]byte, 32)
	rand.Read(nonce)
	c.nonce = base64.StdEncoding.EncodeToString(nonce)
	c.touch()
	deadline := c.srv.cfg.Clock.AfterFunc(c.srv.cfg.HandshakeDeadline, c.handshakeDeadline)
	defer deadline.Stop()
	if !c.send(&protocol.Challenge{Nonce: c.nonce, ProtocolVersion: protocol.ProtocolVersion}) {
		return
	}
	in := &intake{c: c}
	defer in.stop()
	for {
		typ, buf, err := messageBuffers.Read(c.ctx, c.ws)
		if err != nil {
			// The read limit closes the socket with 1009: the transport cap
			// once established, the pre-auth cap before (ws.go).
			if st := c.state(); errors.Is(err, websocket.ErrMessageTooBig) && (st == connHandshaking || st == connVerifying) {
				c.auditPreAuthFrame(string(protocol.ReasonFrameTooLarge))
			}
			return
		}
		data := *buf
		kind := protocol.TextMessage
		if typ != websocket.MessageText {
			kind = protocol.BinaryMessage
		}
		switch st := c.state(); st {
		case connHandshaking, connVerifying:
			ok := c.preAuthFrame(st, kind, data)
			messageBuffers.Put(buf)
			if !ok {
				return
			}
		case connAwaitingAck, connActive, connLeaving, connClosed:
			if c.dev.Load() == nil {
				// Closed before it was attached (rejected, timed out): the
				// socket closes once helloReject is out; nothing on it is
				// heard meanwhile.
				messageBuffers.Put(buf)
				continue
			}
			c.touch()
			if !in.take(inbound{kind, buf}) {
				return
			}
		}
	}
}

// handshakeDeadline closes a socket whose handshake did not finish in
// time (§1.2); a handshake that finished first makes it moot.
func (c *conn) handshakeDeadline() {
	if from, next, _ := c.to(evDeadline); next != from {
		c.srv.audit(c.ctx, store.AuditEvent{Event: string(EventHandshakeTimeout), RemoteAddr: c.remote})
		c.close()
	}
}

// messageBuffers are the read buffers of every socket: a buffer is taken
// once a message has begun to arrive and held until its frame is decoded
// (decoded frames never alias it), so an idle device holds none.
var messageBuffers wsmsg.Pool

// inbound is one message read from the socket, in arrival order; buf goes
// back to messageBuffers once it is handled.
type inbound struct {
	kind protocol.MessageKind
	buf  *[]byte
}

// inlineFrameBytes: a message this small is handled on the reading
// goroutine when nothing waits before it — results, exit chunks, heartbeats:
// the frames a round trip waits for skip a goroutine handoff.
const inlineFrameBytes = 4 << 10

// intake handles the established frames of one socket in arrival order.
// Large frames (output) are decoded and handled by a second goroutine, fed
// through a small queue, so that reading the next message from the socket
// overlaps with decoding this one (the strict decode of a 64 KiB chunk is
// the lane's largest per-frame cost). A small frame is handled inline when
// the queue is empty and the worker idle (queued counts the frames given to
// the worker and not yet handled; only the reader adds to it, so zero means
// nothing is ahead of this frame). The worker starts with the first large
// frame: a device that only sends heartbeats has one goroutine.
type intake struct {
	c       *conn
	work    chan inbound
	queued  atomic.Int64
	handled chan struct{}
}

// take handles or queues m; false when the connection is ending.
func (in *intake) take(m inbound) bool {
	if in.queued.Load() == 0 && len(*m.buf) <= inlineFrameBytes {
		in.handle(m)
		return true
	}
	if in.work == nil {
		in.work, in.handled = make(chan inbound, 8), make(chan struct{})
		go in.worker()
	}
	in.queued.Add(1)
	select {
	case in.work <- m:
		return true
	case <-in.c.ctx.Done():
		messageBuffers.Put(m.buf)
		return false
	}
}

func (in *intake) worker() {
	defer close(in.handled)
	for m := range in.work {
		in.handle(m)
		in.queued.Add(-1)
	}
}

func (in *intake) handle(m inbound) {
	in.c.established(m.kind, *m.buf)
	messageBuffers.Put(m.buf)
}

// stop ends the worker after it has handled what was queued.
func (in *intake) stop() {
	if in.work != nil {
		close(in.work)
		<-in.handled
	}
}

// established takes one message after the handshake: it refreshes
// liveness, parses (stage 1) and admits (stage 2) the frame. A bad frame
// costs the frame, not the connection (§2.4).
func (c *conn) established(kind protocol.MessageKind, data []byte) {
	c.touch()
	f, err := protocol.DecodeDeviceFrame(kind, data, protocol.MaxFrameBytes)
	if err != nil {
		var fe *protocol.FrameError
		errors.As(err, &fe)
		c.auditFrame(string(fe.Reason))
		return
	}
	c.srv.handleFrame(c, f)
}

// preAuthFrame handles a frame before the handshake completes (§1.2, §2.4):
// the first must be a well-formed hello under the pre-auth cap; a malformed
// frame closes the socket; a frame while the hello is being verified is
// dropped pre_hello (admit decides). It reports whether to keep reading.
func (c *conn) preAuthFrame(st connState, kind protocol.MessageKind, data []byte) bool {
	f, err := protocol.DecodeDeviceFrame(kind, data, protocol.MaxPreAuthFrameBytes)
	if err != nil {
		var fe *protocol.FrameError
		errors.As(err, &fe)
		c.auditPreAuthFrame(string(fe.Reason))
		c.close()
		return false
	}
	v := admit(st, f.Type(), false)
	switch v.action {
	case frameHandle:
	case frameDrop, frameRepeat:
		c.auditPreAuthFrame(v.reason)
		return true
	case frameClose:
		c.auditPreAuthFrame(v.reason)
		c.close()
		return false
	}
	hello, ok := f.(*protocol.Hello)
	if !ok { // admit handles nothing else before the handshake
		c.srv.log.Error("lane: admit let a non-hello frame through before the handshake", "type", f.Type())
		c.close()
		return false
	}
	// The nonce is consumed by this hello, verified or not.
	if _, next, _ := c.to(evHello); next != connVerifying {
		return false // the deadline closed the socket first
	}
	c.srv.handlers.Add(1)
	c.handshaking.Add(1)
	go func() {
		defer c.srv.handlers.Done()
		defer c.handshaking.Done()
		c.srv.handshake(c, hello)
	}()
	return true
}

// reject answers helloReject as the socket's last frame and audits it
// (§1.4). A deadline that closed the socket first makes it moot.
func (c *conn) reject(code protocol.HelloRejectCode, deviceID string) {
	if from, next, err := c.to(evReject); err != nil || next == from {
		return
	}
	r := &protocol.HelloReject{Code: code}
	if code == protocol.RejectProtocolVersionUnsupported {
		v := protocol.MinProtocolVersion
		r.MinProtocolVersion = &v
	}
	c.srv.audit(c.ctx, store.AuditEvent{DeviceID: deviceID, Event: string(EventHelloRejected), Reason: string(code), RemoteAddr: c.remote})
	c.sendLast(r)
}

// handshake verifies a hello and, if it holds, takes the lease and answers
// helloAck (§1.3–§1.5). Every refusal is audited; auth_failed is answered
// for every identity failure alike, and when the registry is unreachable.
func (s *Server) handshake(c *conn, h *protocol.Hello) {
	payload, err := protocol.HelloSignaturePayload(c.nonce, h.DeviceID, h.Epoch, h.ProtocolVersion)
	if err != nil {
		c.reject(protocol.RejectAuthFailed, "")
		return
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(h.SignatureB64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		c.reject(protocol.RejectAuthFailed, "")
		return
	}
	revocations, counted := s.revocationCount()
	dev, err := s.store.Device(c.ctx, h.DeviceID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Error("lane: registry unavailable during a handshake", "err", err)
		}
		c.reject(protocol.RejectAuthFailed, "")
		return
	}
	if len(dev.PublicKey) != ed25519.PublicKeySize || !ed25519.Verify(dev.PublicKey, payload, sig) {
		c.reject(protocol.RejectAuthFailed, dev.ID)
		return
	}
	switch {
	case dev.Revoked():
		c.reject(protocol.RejectRevoked, dev.ID)
		return
	case h.ProtocolVersion < protocol.MinProtocolVersion || h.ProtocolVersion > protocol.ProtocolVersion:
		c.reject(protocol.RejectProtocolVersionUnsupported, dev.ID)
		return
	case s.isDraining():
		c.reject(protocol.RejectDraining, dev.ID)
		return
	}
	c.deviceID, c.epoch = dev.ID, h.Epoch
	c.record, c.recordAt, c.recorded = dev, revocations, counted
	c.supports = map[protocol.InstructionKind]bool{}
	for _, k := range h.Supports {
		if k.Valid() { // §3.2: kinds the server does not know are ignored
			c.supports[k] = true
		}
	}
	attached, code, held := s.attach(c, s.device(dev.ID), h.Epoch, "")
	if held != nil && s.handedOver(c.ctx, dev.ID, c.remote, *held) {
		attached, code, _ = s.attach(c, s.device(dev.ID), h.Epoch, held.Previous)
	}
	switch {
	case attached:
		s.audit(c.ctx, store.AuditEvent{DeviceID: dev.ID, Event: string(EventConnected), RemoteAddr: c.remote})
	case code != "":
		c.reject(code, dev.ID)
	}
}

// attach makes c the device's current connection: it takes the stored
// lease (superseding a stale previous socket, or the holder remote another
// replica let go: handover.go), applies the epoch rule, and queues
// helloAck. Otherwise it returns the reject code, or none when the
// handshake deadline closed the socket meanwhile; a lease another replica
// holds is returned too, for the caller to ask it over (outside d.mu).
func (s *Server) attach(c *conn, d *deviceState, epoch, remote string) (attached bool, _ protocol.HelloRejectCode, heldElsewhere *store.Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.isDraining() {
		// Checked again under d.mu: a Shutdown that listed the devices
		// before this one had state here would never kick it.
		return false, protocol.RejectDraining, nil
	}
	old := d.conn
	takeover := remote
	switch {
	case old != nil:
		if !old.stale() {
			return false, protocol.RejectAlreadyConnected, nil
		}
		takeover = old.holder
	case takeover == "":
		takeover = d.graceHolder // the lease kept for the grace ("" if none)
	}
	lease, err := s.leases.acquire(store.LeaseRequest{DeviceID: d.id, Holder: c.holder, Epoch: epoch, Replica: s.replica, TTL: s.cfg.LeaseTTL, Takeover: takeover})
	switch {
	case errors.Is(err, store.ErrRevoked):
		return false, protocol.RejectRevoked, nil
	case errors.Is(err, store.ErrLeaseHeld) && remote == "" && lease.PreviousReplica != s.replica:
		return false, protocol.RejectAlreadyConnected, &lease
	case errors.Is(err, store.ErrLeaseHeld):
		return false, protocol.RejectAlreadyConnected, nil
	case err != nil:
		s.log.Error("lane: registry unavailable while taking a lease", "device", d.id, "err", err)
		return false, protocol.RejectAuthFailed, nil
	}
	c.gen = protocol.Gen(lease.Gen)
	c.leaseRound = s.leaseRound.Load() // after the lease is taken (renewer.go)
	c.dev.Store(d)
	if _, next, _ := c.to(evAttach); next != connAwaitingAck {
		// The handshake deadline closed the socket while the hello was
		// verified: nothing is attached and the lease just taken goes. (A
		// stale socket it took the lease over from loses it too: its next
		// renewal finds the lease lost and closes it.) Frames read
		// meanwhile meet d.conn != c: void (R9).
		s.releaseLease(d.id, c.holder)
		return false, "", nil
	}
	if old != nil {
		// R13 superseded: the old socket is told and closed; its frames are
		// void from now on (R9), because it is no longer d.conn.
		s.drop(d, old, protocol.ByeSuperseded)
	}
	waited := d.stopGrace() != ""
	gen := c.gen
	if d.epoch != "" && d.epoch != epoch {
		// R3: a new epoch abandons everything in flight, before helloAck.
		for _, call := range d.sortedCalls() {
			s.settle(d, call, protocol.StateTerminal, laneFailure(protocol.ErrOutcomeUnknown,
				"the executor restarted (a new epoch) while the instruction was in flight; it may have run"))
		}
	}
	// R2: a same-epoch reconnect resumes: every call still held is listed,
	// with its watermark, and re-bound to the new generation.
	pending, watermarks := []string{}, map[string]int64{}
	for _, call := range d.sortedCalls() {
		call.frame.Gen = gen
		pending = append(pending, call.ID)
		// The acknowledged watermark, not the delivered one: chunks the
		// lane withheld its ack for are not yet accepted (§4), and the
		// device re-sends them as absorbed duplicates (backlog.go).
		watermarks[call.ID] = call.ackedTo
	}
	if waited {
		d.notify(DeviceNotice{Connected: true}) // the calls that waited for it, if any are left
	}
	d.epoch = epoch
	d.conn, c.attached = c, true
	c.connectedAt = s.cfg.Clock.Now()
	s.leavePreAuth(c)
	// Stage 0 from here on (§2.4): the transport cap, in place before the
	// device can send a frame of the established connection, which needs
	// the helloAck below.
	c.ws.SetReadLimit(protocol.MaxFrameBytes)
	c.scheduleLiveness()
	// Queued here, under d.mu, in the step that attached c: no ack and no
	// dispatch can be queued before it (dispatch and cancels also wait for
	// generationAck, which answers it).
	c.send(&protocol.HelloAck{
		HeartbeatIntervalMs: s.cfg.HeartbeatInterval.Milliseconds(),
		MaxInflight:         s.cfg.MaxInflight,
		Gen:                 gen,
		PendingInstructions: pending,
		ChunkWatermarks:     watermarks,
	})
	return true, "", nil
}

// scheduleLiveness arms the R14 deadline (d.mu held): when no frame came for
// 3 × H the socket is closed, at that moment; a newer frame moves the
// deadline, and the timer is armed again from it.
func (c *conn) scheduleLiveness() {
	c.liveness = c.srv.cfg.Clock.AfterFunc(c.livenessLimit()-c.silence(), func() {
		d := c.dev.Load()
		d.mu.Lock()
		defer d.mu.Unlock()
		if c.ctx.Err() != nil || c.state() == connClosed {
			return
		}
		if c.stale() {
			c.srv.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: string(EventLivenessLost), RemoteAddr: c.remote})
			c.close()
			return
		}
		c.scheduleLiveness()
	})
}

// drop ends a connection with a bye (d.mu held): superseded, revoked or
// draining (R13).
// The bye is the socket's last frame; the writer closes it once it is out.
func (s *Server) drop(d *deviceState, c *conn, reason protocol.ByeReason) {
	if from, next, err := c.to(evDrop); err != nil || next == from {
		return
	}
	if d.conn == c {
		d.conn = nil
	}
	c.sendLast(&protocol.Bye{Gen: c.gen, Reason: reason})
}

// cleanup runs when the handler's read loop ends: the connection closes,
// its write loop and its handshake end, and what it attached is undone.
func (c *conn) cleanup() {
	// Last: the payloads this connection sends stop once it is closed, or
	// their call settles, or a read of their content returns; the
	// connection is over when they are.
	defer c.payloads.Wait()
	c.close()
	s := c.srv
	s.leavePreAuth(c)
	// A hello still being verified may yet attach this (now closed) socket
	// as the device's connection: wait for it, so that what it attached is
	// undone below rather than left behind.
	c.handshaking.Wait()
	c.w.loops.Wait() // close shut the writer: no loop starts any more
	c.ws.CloseNow()
	d := c.dev.Load()
	if d == nil || !c.attached { // never attached, or the deadline won and the attach undid itself
		c.to(evEnd)
		return
	}
	d.mu.Lock()
	if c.liveness != nil {
		c.liveness.Stop()
	}
	if c.goodbyeTimer != nil {
		c.goodbyeTimer.Stop()
	}
	c.to(evEnd)
	kept := false
	if d.conn == c {
		d.conn = nil
		// Queued calls were never sent: they wait for the reconnect too.
		kept = s.startGrace(d, c.holder)
	}
	d.mu.Unlock()
	if !kept {
		s.releaseLease(d.id, c.holder)
	}
	s.audit(context.Background(), store.AuditEvent{DeviceID: d.id, Event: string(EventDisconnected), RemoteAddr: c.remote})
}

func newConn(s *Server, ws *websocket.Conn, remote string) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{srv: s, ws: ws, holder: ids.New("con_"), remote: remote, ctx: ctx, cancel: cancel}
	c.w.init(queueBound(s.cfg.MaxInflight))
	return c
}
