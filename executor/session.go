package executor

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/internal/wsmsg"
	"github.com/sema-agent/sema/protocol"
)

// A session is one socket: handshake, fence, generationAck, then three
// goroutines until the socket ends — the reader (frames in, dispatched at
// once), the writer (the only goroutine that writes: control frames first,
// then the outbox) and the heartbeat. Each has one owner (serve), closes
// its done channel on return, and stops when the session context ends.

var (
	errHandshakeTimeout = errors.New("no helloAck within the handshake deadline")
	errByeDraining      = errors.New("the lane said bye: draining")
	errSocketEnded      = errors.New("the socket ended")
)

type session struct {
	rt   *Runtime
	conn *websocket.Conn
	raw  *coalescingConn // under conn; nil when the HTTP client is not ours
	gen  protocol.Gen
	hb   time.Duration
	rbuf []byte // the read buffer, reused message after message

	ctrl    chan ctrlFrame // heartbeats and goodbye, ahead of the outbox
	goodbye atomic.Bool    // sent: new instructions are failed explicitly
	bye     atomic.Value   // protocol.ByeReason, once received
}

// connect runs one socket from discovery to its end.
func (rt *Runtime) connect(ctx context.Context) sessionEnd {
	wsURL, err := rt.discover(ctx)
	if err != nil {
		return sessionEnd{err: err}
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	var dialed atomic.Pointer[coalescingConn]
	conn, _, err := websocket.Dial(withDialedConn(dctx, &dialed), wsURL, &websocket.DialOptions{HTTPClient: rt.wsClient})
	cancel()
	if err != nil {
		return sessionEnd{err: fmt.Errorf("dial %s: %w", wsURL, err)}
	}
	defer conn.CloseNow()
	// Frames from the lane are at most 1 MiB (§2.1); the library closes
	// the socket (1009) on a larger one.
	conn.SetReadLimit(protocol.MaxFrameBytes)

	s := &session{rt: rt, conn: conn, raw: dialed.Load(), ctrl: make(chan ctrlFrame, 8)}
	ack, end := s.handshake(ctx)
	if ack == nil {
		return end
	}
	s.gen = ack.Gen
	s.hb = time.Duration(ack.HeartbeatIntervalMs) * time.Millisecond
	rt.log.Info("hello accepted", "gen", s.gen.String(), "pending", len(ack.PendingInstructions), "heartbeatMs", ack.HeartbeatIntervalMs, "maxInflight", ack.MaxInflight)

	// The fence (§1.5, R2, R10): keep the listed, stop and forget the rest,
	// trim the outbox to the watermarks, and only then generationAck.
	unknown, forgotten, err := rt.tab.fence(ack.PendingInstructions, rt.cfg.FenceWait)
	if err != nil {
		conn.Close(websocket.StatusTryAgainLater, "fence incomplete")
		return sessionEnd{err: fmt.Errorf("fence: %w", err), handshook: true}
	}
	if ctx.Err() != nil {
		return sessionEnd{shutdown: true, handshook: true}
	}
	for _, id := range rt.out.resume(ack.ChunkWatermarks) {
		rt.log.Error("the lane's watermark is below chunks it already acked; the stream cannot be completed", "instructionId", id)
	}
	for _, id := range unknown {
		// Listed, but its instruction frame never reached this process
		// (same epoch, nothing parsed): it never started here.
		if e := rt.tab.add(id, ""); e != nil {
			rt.log.Warn("the lane lists an instruction this executor never received", "instructionId", id)
			rt.tab.answerNow(e, protocol.Fail(protocol.ErrTargetUnavailable,
				"this instruction never reached the executor (the connection dropped while it was being sent); it never started"))
		}
	}
	for _, id := range forgotten {
		// Listed, but this process already stopped and forgot it: another
		// connection's helloAck did not list it (§1.5), so it was fenced,
		// or its result was given up. Listed, it may be answered (R2), and
		// answering now spares the lane waiting out timeoutMs for a result
		// that would never come. Whether it ran is not known here.
		if e := rt.tab.readmit(id); e != nil {
			rt.log.Warn("the lane lists an instruction this executor already stopped and forgot", "instructionId", id)
			rt.tab.answerNow(e, protocol.Fail(protocol.ErrOutcomeUnknown,
				"the executor had already stopped and forgotten this instruction (a connection to another lane replica did not list it, §1.5); it may have run"))
		}
	}
	if err := s.writeOwnDeadline(&protocol.GenerationAck{Gen: s.gen}); err != nil {
		return sessionEnd{err: err, handshook: true}
	}
	rt.mu.Lock()
	rt.sessions++
	rt.mu.Unlock()
	rt.status.update(func(st *Status) {
		st.Connected, st.Gen, st.LastError, st.Inflight = true, s.gen.String(), "", rt.tab.inflight()
	})
	return s.serve(ctx)
}

// handshake reads the challenge, sends the signed hello and reads the
// answer, all within the handshake deadline (§1.2). It returns the helloAck,
// or nil and how the session ended.
func (s *session) handshake(ctx context.Context) (*protocol.HelloAck, sessionEnd) {
	rt := s.rt
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := rt.cfg.Clock.AfterFunc(protocol.HandshakeDeadline, func() { cancel(errHandshakeTimeout) })
	defer deadline.Stop()
	fail := func(err error) (*protocol.HelloAck, sessionEnd) {
		if ctx.Err() != nil {
			return nil, sessionEnd{shutdown: true}
		}
		if c := context.Cause(hctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
		return nil, sessionEnd{err: fmt.Errorf("handshake: %w", err)}
	}

	f, err := s.readFrame(hctx)
	if err != nil {
		return fail(err)
	}
	ch, ok := f.(*protocol.Challenge)
	if !ok {
		return fail(fmt.Errorf("expected challenge, got %s", f.Type()))
	}
	payload, err := protocol.HelloSignaturePayload(ch.Nonce, rt.cfg.DeviceID, rt.epoch, protocol.ProtocolVersion)
	if err != nil {
		return fail(err)
	}
	hello := &protocol.Hello{
		ProtocolVersion: protocol.ProtocolVersion,
		DeviceID:        rt.cfg.DeviceID,
		Epoch:           rt.epoch,
		SignatureB64:    base64.StdEncoding.EncodeToString(ed25519.Sign(rt.cfg.Key, payload)),
		Platform:        protocol.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, ExecutorVersion: rt.cfg.ExecutorVersion},
		WorkspaceRoot:   rt.cfg.WorkspaceRoot,
		PathFlavor:      "posix",
		Supports:        rt.supports,
	}
	rt.mu.Lock()
	resumed := rt.sessions > 0
	rt.mu.Unlock()
	if resumed {
		hello.Resuming = &protocol.Resuming{UnackedResults: rt.out.unackedResults()}
	}
	if err := s.write(hctx, hello); err != nil {
		return fail(err)
	}
	for {
		f, err = s.readFrame(hctx)
		if err != nil {
			return fail(err)
		}
		switch f := f.(type) {
		case *protocol.HelloAck:
			return f, sessionEnd{}
		case *protocol.HelloReject:
			return nil, rt.rejected(f)
		case *protocol.Ping:
			continue
		default:
			return fail(fmt.Errorf("expected helloAck or helloReject, got %s", f.Type()))
		}
	}
}

// rejected maps a helloReject to the reaction of §1.4.
func (rt *Runtime) rejected(r *protocol.HelloReject) sessionEnd {
	err := fmt.Errorf("helloReject %s", r.Code)
	switch r.Code {
	case protocol.RejectRevoked:
		return sessionEnd{err: err, terminal: ErrRevoked}
	case protocol.RejectProtocolVersionUnsupported:
		return sessionEnd{err: err, terminal: &UpgradeRequiredError{Ours: protocol.ProtocolVersion, Min: r.MinProtocolVersion}}
	case protocol.RejectAuthFailed:
		rt.log.Warn("the lane refused this device's hello (auth_failed); if this never clears, the enrollment is gone: enroll again")
	case protocol.RejectAlreadyConnected:
		rt.log.Warn("the lane holds another connection for this device (already_connected); its lease expires on its own")
	}
	return sessionEnd{err: err} // auth_failed, draining, already_connected: back off and retry
}

// readFrame reads and decodes one server frame. Only the goroutine that
// reads the socket calls it; decoded frames do not alias s.rbuf, which the
// next read reuses.
func (s *session) readFrame(ctx context.Context) (protocol.ServerFrame, error) {
	typ, data, err := wsmsg.Read(ctx, s.conn, s.rbuf)
	s.rbuf = data
	if err != nil {
		return nil, err
	}
	kind := protocol.TextMessage
	if typ != websocket.MessageText {
		kind = protocol.BinaryMessage
	}
	return protocol.DecodeServerFrame(kind, data)
}

// write encodes and writes one frame.
func (s *session) write(ctx context.Context, f protocol.DeviceFrame) error {
	b, err := f.MarshalJSON()
	if err != nil {
		return err
	}
	return s.conn.Write(ctx, websocket.MessageText, b)
}

// writeOwnDeadline writes f bounded by the handshake deadline rather than
// by the process's context: the library closes the socket when a write's
// context ends mid-write, and a shutdown that starts meanwhile must find
// the socket whole, to say goodbye on it (§1.6).
func (s *session) writeOwnDeadline(f protocol.DeviceFrame) error {
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := s.rt.cfg.Clock.AfterFunc(protocol.HandshakeDeadline, cancel)
	defer t.Stop()
	return s.write(wctx, f)
}

// serve runs the socket after generationAck until it ends or ctx (the
// process) ends, which starts the graceful shutdown (R15).
func (s *session) serve(ctx context.Context) sessionEnd {
	sctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	readDone, writeDone, beatDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		stop(s.readLoop(sctx))
	}()
	go func() {
		defer close(writeDone)
		stop(s.writeLoop(sctx))
	}()
	go func() {
		defer close(beatDone)
		s.heartbeatLoop(sctx)
	}()

	shutdown := false
	select {
	case <-sctx.Done():
	case <-ctx.Done():
		shutdown = true
		if s.shutdown(sctx) {
			s.conn.Close(websocket.StatusNormalClosure, "shutdown")
		}
		// Without a written goodbye there is no point in a close
		// handshake: it would wait on the same stuck writer.
		stop(errShutdown)
	}
	s.conn.CloseNow()
	<-readDone
	<-writeDone
	<-beatDone
	s.rt.tab.endPayloads()

	end := sessionEnd{err: context.Cause(sctx), handshook: true, shutdown: shutdown}
	if r, ok := s.bye.Load().(protocol.ByeReason); ok && !shutdown {
		switch r {
		case protocol.ByeRevoked:
			end.terminal = ErrRevoked
		case protocol.ByeSuperseded:
			end.terminal = ErrSuperseded
		default:
			end.err = errByeDraining
		}
	}
	return end
}

// readLoop reads frames until the socket ends, dispatching each at once.
func (s *session) readLoop(ctx context.Context) error {
	for {
		f, err := s.readFrame(ctx)
		var ie *protocol.InstructionError
		switch {
		case errors.As(err, &ie):
			s.rt.receiveInvalid(s, ie)
			continue
		case err != nil && isFrameError(err):
			s.rt.log.Warn("dropped a malformed frame from the lane", "err", err)
			continue
		case err != nil:
			return fmt.Errorf("%w: %w", errSocketEnded, err)
		}
		if s.dispatch(ctx, f) {
			return errSocketEnded
		}
	}
}

func isFrameError(err error) bool {
	var fe *protocol.FrameError
	return errors.As(err, &fe)
}

// dispatch handles one frame; true means the socket is over (bye).
func (s *session) dispatch(ctx context.Context, f protocol.ServerFrame) bool {
	rt := s.rt
	stale := func(g protocol.Gen) bool {
		if g != s.gen {
			rt.log.Warn("dropped a frame stamped with another generation", "type", f.Type(), "gen", g.String(), "current", s.gen.String())
			return true
		}
		return false
	}
	switch f := f.(type) {
	case *protocol.Instruction:
		rt.receive(s, f)
	case *protocol.Payload:
		if !stale(f.Gen) {
			rt.routePayload(ctx, f)
		}
	case *protocol.Cancel:
		if !stale(f.Gen) {
			rt.receiveCancel(f.InstructionID)
		}
	case *protocol.ResultAck:
		if !stale(f.Gen) && rt.out.resultAck(f.InstructionID) {
			rt.tab.release(f.InstructionID)
		}
	case *protocol.ChunkAck:
		if !stale(f.Gen) && !rt.out.chunkAck(f.InstructionID, f.UpToStreamSeq) {
			rt.log.Warn("chunkAck beyond the chunks sent", "instructionId", f.InstructionID, "upTo", f.UpToStreamSeq)
		}
	case *protocol.Bye:
		s.bye.Store(f.Reason)
		rt.log.Warn("the lane said bye", "reason", f.Reason)
		return true
	case *protocol.Ping:
		// Declared, never sent today (§8): accepted and ignored.
	default:
		rt.log.Warn("ignored an unexpected frame after the handshake", "type", f.Type())
	}
	return false
}

// writeLoop is the socket's only writer: control frames (heartbeat,
// goodbye) first, then whatever the outbox has to send.
func (s *session) writeLoop(ctx context.Context) error {
	rt := s.rt
	var wbuf []byte // chunk frames are encoded here; Write does not keep it
	// While the outbox has frames ready one after another the socket is
	// corked, so that they leave in one write: an exit chunk and its
	// result reach the lane in one read. It is uncorked before the loop
	// waits, and before a control frame, whose write must be on the wire
	// when it returns (the goodbye, §1.6).
	corked := false
	uncork := func() error {
		if !corked {
			return nil
		}
		corked = false
		if err := s.raw.uncork(); err != nil {
			return fmt.Errorf("%w: %w", errSocketEnded, err)
		}
		return nil
	}
	defer uncork()
	for {
		select {
		case c := <-s.ctrl:
			if err := uncork(); err != nil {
				return err
			}
			if err := s.writeCtrl(ctx, c); err != nil {
				return err
			}
			continue
		default:
		}
		fr, gaveUp, ok := rt.out.pull(s.gen)
		for _, id := range gaveUp {
			rt.giveUp(id, "sent on too many sockets without an ack")
		}
		if ok && !corked && s.raw != nil {
			s.raw.cork()
			corked = true
		}
		if ok {
			id, b, err := fr.encode(wbuf)
			fr.done() // b is a copy
			if err != nil {
				rt.log.Error("a frame could not be encoded; its instruction is given up", "instructionId", id, "err", err)
				rt.giveUp(id, "unencodable")
				continue
			}
			if fr.result != nil {
				probe.Mark(probe.ExecResultWrite) // before: the lane may read it before Write returns
			}
			if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
				return fmt.Errorf("%w: %w", errSocketEnded, err)
			}
			if fr.chunk != nil {
				wbuf = b
			}
			continue
		}
		if err := uncork(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case c := <-s.ctrl:
			if err := s.writeCtrl(ctx, c); err != nil {
				return err
			}
		case <-rt.out.wake:
		}
	}
}

// ctrlFrame is a control frame for the writer; written, when set, gets the
// write's result (it must have room for it: the writer never waits on it).
type ctrlFrame struct {
	f       protocol.DeviceFrame
	written chan<- error
}

func (s *session) writeCtrl(ctx context.Context, c ctrlFrame) error {
	err := s.write(ctx, c.f)
	if c.written != nil {
		c.written <- err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errSocketEnded, err)
	}
	return nil
}

// heartbeatLoop sends heartbeat every H with an increasing seq and the ids
// whose op is running (R14), and runs the periodic chores.
func (s *session) heartbeatLoop(ctx context.Context) {
	rt := s.rt
	var seq int64
	for {
		t := rt.cfg.Clock.NewTimer(s.hb)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		inflight := rt.tab.inflight()
		select {
		case s.ctrl <- ctrlFrame{f: &protocol.Heartbeat{Gen: s.gen, Seq: seq, Inflight: inflight}}:
			seq++
		case <-ctx.Done():
			return
		}
		for _, id := range rt.out.expired(rt.cfg.Clock.Now()) {
			rt.giveUp(id, "no ack within the give-up time")
		}
		rt.status.update(func(st *Status) { st.Inflight = inflight })
	}
}
