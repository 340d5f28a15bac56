package lane

import (
	"time"

	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// handleFrame admits one parsed frame of an established connection (§2.4
// stage 2) and acts on it. Nothing here trusts the device: every refusal is
// a dropped frame and an audit row, never a panic. What the connection's
// state allows is admit's table (connstate.go); the switch below handles
// every frame type it can let through, and any other fails loudly.
func (s *Server) handleFrame(c *conn, f protocol.DeviceFrame) {
	d := c.dev.Load()
	d.mu.Lock()
	v := admit(c.state(), f.Type(), d.conn == c && frameGen(f) == c.gen)
	switch v.action {
	case frameHandle:
	case frameDrop, frameClose: // frameClose is for the pre-auth phase only; here the frame is dropped
		d.mu.Unlock()
		c.auditFrame(v.reason)
		return
	case frameRepeat:
		d.mu.Unlock()
		// §2.4's refusal reasons name no repeat; a repeated generationAck or
		// goodbye changes nothing and has its own audit event.
		s.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: string(EventFrameRepeated), Reason: string(f.Type()), RemoteAddr: c.remote})
		return
	}
	switch f := f.(type) {
	case *protocol.GenerationAck:
		s.generationAck(d, c)
		d.mu.Unlock()
	case *protocol.Heartbeat:
		// Liveness only (touch, R14): the stored lease is renewed for all
		// of the replica's connections at once (renewer.go).
		d.mu.Unlock()
	case *protocol.Goodbye:
		s.goodbye(d, c, f)
		d.mu.Unlock()
	case *protocol.Result:
		probe.Mark(probe.LaneResultRead)
		d.mu.Unlock()
		s.handleResult(c, f)
	case *protocol.Chunk:
		d.mu.Unlock()
		s.handleChunk(c, f)
	default: // *protocol.Hello never gets here: admit refuses it pre_hello
		d.mu.Unlock()
		s.log.Error("lane: admit let through a frame type the lane does not handle", "type", f.Type())
		c.auditFrame(string(protocol.ReasonUnknownType))
	}
}

// frameGen is the gen a frame carries; a hello carries none.
func frameGen(f protocol.DeviceFrame) protocol.Gen {
	switch f := f.(type) {
	case *protocol.GenerationAck:
		return f.Gen
	case *protocol.Heartbeat:
		return f.Gen
	case *protocol.Result:
		return f.Gen
	case *protocol.Chunk:
		return f.Gen
	case *protocol.Goodbye:
		return f.Gen
	case *protocol.Hello:
	}
	return 0 // no gen: admit refuses every gen-carrying frame it cannot match
}

// generationAck opens dispatch for the generation (R10), replays wanted
// cancels on this first active tick (R11), and fills the in-flight slots.
func (s *Server) generationAck(d *deviceState, c *conn) {
	if _, _, err := c.to(evGenerationAck); err != nil {
		return
	}
	for _, call := range d.sortedCalls() {
		if call.cancelWant {
			s.deliverCancel(d, call)
		}
	}
	s.pump(d)
}

// goodbye stops new dispatch at once, settles what was only queued (it
// never left the lane), keeps collecting results, and closes after graceMs
// (R15, §1.6).
func (s *Server) goodbye(d *deviceState, c *conn, g *protocol.Goodbye) {
	if _, _, err := c.to(evGoodbye); err != nil {
		return
	}
	for len(d.queue) > 0 {
		s.settle(d, d.queue[0], protocol.StateTerminalNeverStarted,
			laneFailure(protocol.ErrTargetUnavailable, "the device is shutting down (goodbye %s)", g.Reason))
	}
	grace := s.cfg.ReconnectGrace
	if g.GraceMs != nil {
		grace = time.Duration(*g.GraceMs) * time.Millisecond
	}
	s.audit(c.ctx, store.AuditEvent{DeviceID: d.id, Event: string(EventGoodbye), Reason: string(g.Reason), RemoteAddr: c.remote})
	c.goodbyeTimer = s.cfg.Clock.AfterFunc(grace, c.close) // the goodbye grace is over
}

// lookup finds the call a frame names (§2.4 stage 2): in flight on this
// device, remembered as settled, or a gate refusal.
func (s *Server) lookup(c *conn, id string) (call *Call, memoHit bool, gate protocol.GateRejectReason) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if call, ok := s.calls[id]; ok {
		if call.DeviceID != c.deviceID {
			return nil, false, protocol.GateDeviceMismatch
		}
		return call, false, ""
	}
	if dev, ok := s.memo.device(id); ok {
		if dev != c.deviceID {
			return nil, false, protocol.GateDeviceMismatch
		}
		return nil, true, ""
	}
	return nil, false, protocol.GateUnknownInstruction
}

// handleResult accepts a terminal result (R5, R6, §3.1, §4).
func (s *Server) handleResult(c *conn, r *protocol.Result) {
	call, memoHit, gate := s.lookup(c, r.InstructionID)
	switch {
	case gate != "":
		c.auditFrame(string(gate))
		return
	case memoHit:
		// Settled already, for whatever reason: "stop holding this frame",
		// not "accepted" (§2.4).
		c.send(&protocol.ResultAck{Gen: c.gen, InstructionID: r.InstructionID})
		return
	}
	d := c.dev.Load()
	d.mu.Lock()
	switch call.state {
	case protocol.StateTerminal:
		// Settled by the lane between the lookup and now: as a memo hit.
		d.mu.Unlock()
		c.send(&protocol.ResultAck{Gen: c.gen, InstructionID: r.InstructionID})
		return
	case protocol.StateDispatchCommitted:
	default:
		d.mu.Unlock()
		c.auditFrame(string(protocol.GateInstructionNotCommitted))
		return
	}
	if r.DeviceSeq <= call.resultSeq {
		d.mu.Unlock()
		c.send(&protocol.ResultAck{Gen: c.gen, InstructionID: r.InstructionID}) // R6
		return
	}
	call.resultSeq = r.DeviceSeq
	outcome := r.Outcome
	if err := protocol.CheckOutcome(call.Kind, outcome); err != nil {
		// The frame was well formed and admitted; its outcome is refused.
		c.srv.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: string(EventOutcomeRefused), Reason: string(call.Kind), RemoteAddr: c.remote})
		outcome = laneFailure(protocol.ErrOutcomeUnknown, "the device answered with a malformed outcome (%v); the instruction may have run", err)
	} else if err := call.stream.checkTerminal(outcome); err != nil {
		outcome = laneFailure(protocol.ErrOutcomeUnknown, "the output stream cannot be reported faithfully: %v", err)
	}
	s.settle(d, call, protocol.StateTerminal, outcome)
	d.mu.Unlock()
	c.send(&protocol.ResultAck{Gen: c.gen, InstructionID: r.InstructionID})
}

// handleChunk accepts one chunk of a stream (§4, R7, R8).
func (s *Server) handleChunk(c *conn, ch *protocol.Chunk) {
	call, memoHit, gate := s.lookup(c, ch.InstructionID)
	switch {
	case gate != "":
		c.auditFrame(string(gate))
		return
	case memoHit:
		return // a late chunk of a settled instruction is ignored, unacked
	}
	d := c.dev.Load()
	d.mu.Lock()
	switch call.state {
	case protocol.StateTerminal:
		d.mu.Unlock()
		return // settled between the lookup and now: as a memo hit, ignored
	case protocol.StateDispatchCommitted:
	default:
		d.mu.Unlock()
		c.auditFrame(string(protocol.GateInstructionNotCommitted))
		return
	}
	delivered, err := call.stream.accept(*ch)
	if err != nil {
		s.cancelRemote(d, call)
		s.settle(d, call, protocol.StateTerminal, laneFailure(protocol.ErrOutcomeUnknown, "the output stream failed: %v", err))
		d.mu.Unlock()
		return
	}
	for _, out := range delivered {
		call.countOutput(out)
		if !call.push(out) {
			s.deliveryOverflow(d, call, out.StreamSeq)
		}
	}
	s.gapTimer(d, call, len(delivered) > 0)
	// The acknowledgement paces the device by the caller's reading (see
	// backlog): new output is acknowledged while the backlog is inside the
	// window; a duplicate or out-of-order chunk is re-acknowledged with the
	// watermark already sent (§4), never a withheld one.
	advanced := false
	if len(delivered) > 0 {
		var upTo int64
		if upTo, advanced = call.ackNow(); advanced && upTo > call.ackedTo {
			call.ackedTo = upTo
		}
	}
	if advanced || len(delivered) == 0 {
		// Queued under d.mu, as releaseAck's are: the watermarks go out in
		// the order they were decided, never a lower one after a higher.
		c.send(&protocol.ChunkAck{Gen: c.gen, InstructionID: ch.InstructionID, UpToStreamSeq: call.ackedTo})
	}
	d.mu.Unlock()
}

// releaseAck acknowledges output up to upTo — what had been pushed when the
// reader's Next brought the backlog back inside the window, never more
// (backlog.go explains why).
func (s *Server) releaseAck(call *Call, upTo int64) {
	d := s.device(call.DeviceID)
	d.mu.Lock()
	conn := d.conn
	if call.state != protocol.StateDispatchCommitted || conn == nil || !conn.state().takesCancels() || upTo <= call.ackedTo {
		d.mu.Unlock()
		return
	}
	call.ackedTo = upTo
	conn.send(&protocol.ChunkAck{Gen: conn.gen, InstructionID: call.ID, UpToStreamSeq: call.ackedTo})
	d.mu.Unlock()
}

// gapTimer runs while chunks wait behind a missing streamSeq; progress
// restarts it, and a gap it outlives fails the instruction (R8).
func (s *Server) gapTimer(d *deviceState, call *Call, progressed bool) {
	if !call.stream.hasGap() {
		if call.gapTimer != nil {
			call.gapTimer.Stop()
			call.gapTimer = nil
		}
		return
	}
	if call.gapTimer != nil && !progressed {
		return
	}
	if call.gapTimer != nil {
		call.gapTimer.Stop()
	}
	missing := call.stream.watermark + 1
	call.gapTimer = s.cfg.Clock.AfterFunc(s.cfg.GapTimeout, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if call.state == protocol.StateDispatchCommitted && call.stream.hasGap() && call.stream.watermark+1 == missing {
			s.cancelRemote(d, call)
			s.settle(d, call, protocol.StateTerminal, laneFailure(protocol.ErrOutcomeUnknown,
				"streamSeq %d never arrived within the %v gap timeout; output is never silently truncated", missing, s.cfg.GapTimeout))
		}
	})
}
