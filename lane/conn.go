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

// connState is where a connection is in its life. Transitions happen under
// the device's lock once the connection is attached to its device.
type connState int

const (
	connHandshaking connState = iota // challenge sent, no hello verified yet
	connAwaitingAck                  // helloAck sent, waiting for generationAck
	connActive                       // dispatching
	connLeaving                      // the device said goodbye: collect, dispatch nothing
	connClosed                       // superseded, revoked, drained or dropped
)

// conn is one WebSocket from a device. The handler goroutine that accepted
// it owns it and reads it; writes come from anywhere under writeMu.
type conn struct {
	srv    *Server
	ws     *websocket.Conn
	holder string // the lease holder id of this connection
	remote string
	nonce  string

	handshakeDone atomic.Bool
	verifying     atomic.Bool
	handshaking   sync.WaitGroup // the hello's verification, while it runs
	inPreAuth     bool           // counted against the pre-auth caps
	preAuthLeft   atomic.Bool    // the pre-auth slot was released
	lastFrame     atomic.Int64   // unix nanoseconds on the lane clock

	// Set by the handshake, then read-only.
	dev         *deviceState
	deviceID    string
	epoch       string
	supports    map[protocol.InstructionKind]bool
	connectedAt time.Time

	// Under dev.mu.
	state        connState
	gen          protocol.Gen
	issuedSeq    int64
	liveness     clock.Timer
	goodbyeTimer clock.Timer
	leaseRenewed time.Time

	writeMu   sync.Mutex
	closeOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
}

// frameMarshaler is any frame of either direction.
type frameMarshaler interface{ MarshalJSON() ([]byte, error) }

// frameAppender is a frame encoded by hand into a caller's buffer: the
// payload frames that carry a write's content.
type frameAppender interface{ AppendJSON([]byte) ([]byte, error) }

// write sends one frame; a socket that cannot take it is closed.
func (c *conn) write(f frameMarshaler) error {
	var b []byte
	var err error
	if a, ok := f.(frameAppender); ok {
		buf := messageBuffers.Get()
		defer messageBuffers.Put(buf)
		b, err = a.AppendJSON(*buf)
		*buf = b // keep the grown capacity; Write does not retain b
	} else {
		b, err = f.MarshalJSON()
	}
	if err != nil {
		c.srv.log.Error("lane: a frame failed to encode", "device", c.deviceID, "err", err)
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.WriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.close(websocket.StatusGoingAway, "write failed")
		return err
	}
	return nil
}

// close ends the socket once; the reader then cleans up.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		c.cancel()
		go c.ws.Close(code, reason) // the close handshake must not block a lock holder
	})
}

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
	c.srv.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: "device.frame_rejected", Reason: reason, RemoteAddr: c.remote})
}

// auditPreAuthFrame audits a frame refused before the handshake completed.
// No device is verified yet (and the handshake goroutine may be writing
// c.deviceID), so the row names none.
func (c *conn) auditPreAuthFrame(reason string) {
	c.srv.audit(c.ctx, store.AuditEvent{Event: "device.frame_rejected", Reason: reason, RemoteAddr: c.remote})
}

// serve runs one socket from open to close: challenge, handshake, frames.
func (c *conn) serve() {
	defer c.cleanup()
	nonce := make([]byte, 32)
	rand.Read(nonce)
	c.nonce = base64.StdEncoding.EncodeToString(nonce)
	c.touch()
	deadline := c.srv.cfg.Clock.AfterFunc(c.srv.cfg.HandshakeDeadline, func() {
		if !c.handshakeDone.Load() {
			c.srv.audit(c.ctx, store.AuditEvent{Event: "device.handshake_timeout", RemoteAddr: c.remote})
			c.close(websocket.StatusPolicyViolation, "handshake deadline")
		}
	})
	defer deadline.Stop()
	if c.write(&protocol.Challenge{Nonce: c.nonce, ProtocolVersion: protocol.ProtocolVersion}) != nil {
		return
	}
	in := &intake{c: c}
	defer in.stop()
	for {
		buf := messageBuffers.Get()
		typ, data, err := wsmsg.Read(c.ctx, c.ws, *buf)
		*buf = data
		if err != nil {
			messageBuffers.Put(buf)
			return // includes the transport cap: a message over 1 MiB closes with 1009
		}
		kind := protocol.TextMessage
		if typ != websocket.MessageText {
			kind = protocol.BinaryMessage
		}
		if !c.handshakeDone.Load() {
			ok := c.preAuthFrame(kind, data)
			messageBuffers.Put(buf)
			if !ok {
				return
			}
			continue
		}
		c.touch()
		if !in.take(inbound{kind, buf}) {
			return
		}
	}
}

// messageBuffers are the read buffers of every socket: a buffer is held
// from the read until its frame is decoded (decoded frames never alias it),
// so an idle device holds none.
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
// dropped pre_hello. It reports whether to keep reading.
func (c *conn) preAuthFrame(kind protocol.MessageKind, data []byte) bool {
	f, err := protocol.DecodeDeviceFrame(kind, data, protocol.MaxPreAuthFrameBytes)
	if err != nil {
		var fe *protocol.FrameError
		errors.As(err, &fe)
		c.auditPreAuthFrame(string(fe.Reason))
		c.close(websocket.StatusPolicyViolation, string(fe.Reason))
		return false
	}
	if c.verifying.Load() {
		c.auditPreAuthFrame(string(protocol.GatePreHello)) // one stray frame must not kill a handshake
		return true
	}
	hello, ok := f.(*protocol.Hello)
	if !ok {
		c.auditPreAuthFrame(string(protocol.GatePreHello))
		c.close(websocket.StatusPolicyViolation, string(protocol.GatePreHello))
		return false
	}
	c.verifying.Store(true) // the nonce is consumed by this hello, verified or not
	c.srv.handlers.Add(1)
	c.handshaking.Add(1)
	go func() {
		defer c.srv.handlers.Done()
		defer c.handshaking.Done()
		c.srv.handshake(c, hello)
	}()
	return true
}

// reject answers helloReject, audits it, and closes the socket (§1.4).
func (c *conn) reject(code protocol.HelloRejectCode, deviceID string) {
	r := &protocol.HelloReject{Code: code}
	if code == protocol.RejectProtocolVersionUnsupported {
		v := protocol.MinProtocolVersion
		r.MinProtocolVersion = &v
	}
	c.srv.audit(c.ctx, store.AuditEvent{DeviceID: deviceID, Event: "device.hello_rejected", Reason: string(code), RemoteAddr: c.remote})
	c.write(r)
	c.handshakeDone.Store(true)
	c.close(websocket.StatusNormalClosure, "hello rejected")
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
	c.supports = map[protocol.InstructionKind]bool{}
	for _, k := range h.Supports {
		if k.Valid() { // §3.2: kinds the server does not know are ignored
			c.supports[k] = true
		}
	}
	ack, code := s.attach(c, s.device(dev.ID), h.Epoch)
	if ack == nil {
		c.reject(code, dev.ID)
		return
	}
	s.audit(c.ctx, store.AuditEvent{DeviceID: dev.ID, Event: "device.connected", RemoteAddr: c.remote})
	// Nothing else can be written on this socket before helloAck: dispatch
	// and cancels wait for generationAck, which answers it.
	c.write(ack)
}

// attach makes c the device's current connection: it takes the stored
// lease (superseding a stale previous socket), applies the epoch rule, and
// returns the helloAck, or the reject code.
func (s *Server) attach(c *conn, d *deviceState, epoch string) (*protocol.HelloAck, protocol.HelloRejectCode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.isDraining() {
		// Checked again under d.mu: a Shutdown that listed the devices
		// before this one had state here would never kick it.
		return nil, protocol.RejectDraining
	}
	old := d.conn
	takeover := ""
	if old != nil {
		if !old.stale() {
			return nil, protocol.RejectAlreadyConnected
		}
		takeover = old.holder
	}
	lease, err := s.store.AcquireLease(c.ctx, store.LeaseRequest{DeviceID: d.id, Holder: c.holder, Epoch: epoch, Replica: s.replica, TTL: s.cfg.LeaseTTL, Takeover: takeover})
	switch {
	case errors.Is(err, store.ErrRevoked):
		return nil, protocol.RejectRevoked
	case errors.Is(err, store.ErrLeaseHeld):
		return nil, protocol.RejectAlreadyConnected
	case err != nil:
		s.log.Error("lane: registry unavailable while taking a lease", "device", d.id, "err", err)
		return nil, protocol.RejectAuthFailed
	}
	if old != nil {
		// R13 superseded: the old socket is told and closed; its frames are
		// void from now on (R9), because it is no longer d.conn.
		s.drop(d, old, protocol.ByeSuperseded)
	}
	d.stopGrace()
	gen := protocol.Gen(lease.Gen)
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
	d.epoch = epoch
	d.conn = c
	c.dev, c.gen, c.state = d, gen, connAwaitingAck
	c.connectedAt, c.leaseRenewed = s.cfg.Clock.Now(), s.cfg.Clock.Now()
	c.handshakeDone.Store(true)
	s.leavePreAuth(c)
	c.scheduleLiveness()
	return &protocol.HelloAck{
		HeartbeatIntervalMs: s.cfg.HeartbeatInterval.Milliseconds(),
		MaxInflight:         s.cfg.MaxInflight,
		Gen:                 gen,
		PendingInstructions: pending,
		ChunkWatermarks:     watermarks,
	}, ""
}

// scheduleLiveness arms the R14 deadline (d.mu held): when no frame came for
// 3 × H the socket is closed, at that moment; a newer frame moves the
// deadline, and the timer is armed again from it.
func (c *conn) scheduleLiveness() {
	c.liveness = c.srv.cfg.Clock.AfterFunc(c.livenessLimit()-c.silence(), func() {
		d := c.dev
		d.mu.Lock()
		defer d.mu.Unlock()
		if c.ctx.Err() != nil || c.state == connClosed {
			return
		}
		if c.stale() {
			c.srv.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: "device.liveness_lost", RemoteAddr: c.remote})
			c.close(websocket.StatusGoingAway, "no frame for three heartbeat intervals")
			return
		}
		c.scheduleLiveness()
	})
}

// drop ends a connection with a bye (d.mu held): superseded, revoked or
// draining (R13).
func (s *Server) drop(d *deviceState, c *conn, reason protocol.ByeReason) {
	if c.state == connClosed {
		return
	}
	gen := c.gen
	c.state = connClosed
	if d.conn == c {
		d.conn = nil
	}
	s.handlers.Add(1)
	go func() {
		defer s.handlers.Done()
		c.write(&protocol.Bye{Gen: gen, Reason: reason})
		c.close(websocket.StatusNormalClosure, "bye "+string(reason))
	}()
}

// cleanup runs when the handler's read loop ends.
func (c *conn) cleanup() {
	c.close(websocket.StatusNormalClosure, "")
	s := c.srv
	s.leavePreAuth(c)
	// A hello still being verified may yet attach this (now closed) socket
	// as the device's connection: wait for it, so that what it attached is
	// undone below rather than left behind.
	c.handshaking.Wait()
	d := c.dev
	if d == nil {
		return
	}
	d.mu.Lock()
	if c.liveness != nil {
		c.liveness.Stop()
	}
	if c.goodbyeTimer != nil {
		c.goodbyeTimer.Stop()
	}
	c.state = connClosed
	current := d.conn == c
	if current {
		d.conn = nil
		// Queued calls were never sent: they wait for the reconnect too.
		s.startGrace(d)
	}
	d.mu.Unlock()
	s.releaseLease(d.id, c.holder)
	s.audit(context.Background(), store.AuditEvent{DeviceID: d.id, Event: "device.disconnected", RemoteAddr: c.remote})
}

func newConn(s *Server, ws *websocket.Conn, remote string) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{srv: s, ws: ws, holder: ids.New("con_"), remote: remote, ctx: ctx, cancel: cancel}
}
