package lane

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// R9: a frame whose gen is not this socket's negotiated one, or that comes
// on a socket no longer current, is dropped generation_mismatch, no ack.
func TestR9OldGenerationFramesAreVoid(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("x"))
	fd.instructionFor(call.ID)
	g1 := fd.gen
	fd.chunk(call.ID, 0, protocol.ChunkStdout, "a")
	fd.expectChunkAck(call.ID, 0)

	fd.drop()
	fd.establish()
	old := &protocol.Chunk{Gen: g1, InstructionID: call.ID, StreamSeq: 1, Kind: protocol.ChunkStdout, Data: []byte("old")}
	fd.send(old)
	fd.send(&protocol.Result{Gen: g1, InstructionID: call.ID, DeviceSeq: 0, Outcome: protocol.ExecOutcome{}})
	fd.send(&protocol.Result{Gen: fd.gen + 1, InstructionID: call.ID, DeviceSeq: 0, Outcome: protocol.ExecOutcome{}})
	fd.send(&protocol.Goodbye{Gen: g1, Reason: protocol.GoodbyeShutdown})
	fd.send(&protocol.Heartbeat{Gen: g1, Seq: 9})
	frames := fd.barrier()
	none[*protocol.ChunkAck](t, frames, "chunkAck for an old-gen chunk", nil)
	none[*protocol.ResultAck](t, frames, "resultAck for an old-gen result", func(a *protocol.ResultAck) bool { return a.InstructionID == call.ID })
	l.wantRejected(fd.id, "generation_mismatch", "generation_mismatch", "generation_mismatch", "generation_mismatch", "generation_mismatch")
	if isSettled(call) || l.connState(fd.id) != connActive {
		t.Fatal("an old-gen frame acted")
	}
	// Frames on a socket that is no longer the device's current connection.
	stale := l.current(fd.id)
	fd.drop()
	fd.establish()
	l.srv.handleFrame(stale, &protocol.Chunk{Gen: stale.gen, InstructionID: call.ID, StreamSeq: 1, Kind: protocol.ChunkStdout, Data: []byte("x")})
	l.srv.handleFrame(stale, &protocol.Result{Gen: stale.gen, InstructionID: call.ID, DeviceSeq: 1, Outcome: protocol.ExecOutcome{}})
	l.srv.handleFrame(stale, &protocol.GenerationAck{Gen: stale.gen})
	l.wantRejected(fd.id, slices.Repeat([]string{"generation_mismatch"}, 8)...)
	if isSettled(call) {
		t.Fatal("a stale socket's result settled the call")
	}
	// The current gen is still heard.
	fd.chunk(call.ID, 1, protocol.ChunkStdout, "b")
	fd.expectChunkAck(call.ID, 1)
}

// R10: given helloAck(G), nothing is dispatched before generationAck for
// exactly G.
func TestR10NothingDispatchedBeforeGenerationAck(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	ack := fd.connect()
	call := l.dispatch(fd, execInstr("x"))
	if st := l.callState(call); st != protocol.StateQueued {
		t.Fatalf("state %s before generationAck, want queued", st)
	}
	fd.send(&protocol.GenerationAck{Gen: ack.Gen + 1})
	fd.send(&protocol.GenerationAck{Gen: ack.Gen - 1})
	fd.send(&protocol.Heartbeat{Gen: ack.Gen})
	none[*protocol.Instruction](t, fd.barrier(), "an instruction before generationAck", nil)
	if st := l.callState(call); st != protocol.StateQueued {
		t.Fatalf("state %s after a wrong generationAck, want queued", st)
	}
	l.wantRejected(fd.id, "generation_mismatch", "generation_mismatch")
	fd.send(&protocol.GenerationAck{Gen: ack.Gen})
	in := fd.instructionFor(call.ID)
	if in.Gen != ack.Gen || in.IssuedSeq != 1 {
		t.Fatalf("instruction gen %s issuedSeq %d", in.Gen, in.IssuedSeq)
	}
	// A repeated generationAck changes nothing.
	fd.send(&protocol.GenerationAck{Gen: ack.Gen})
	none[*protocol.Instruction](t, fd.barrier(), "a second instruction", nil)
	// After a reconnect, the old generation's ack opens nothing.
	fd.drop()
	fd.connect()
	next := l.dispatch(fd, execInstr("y"))
	fd.send(&protocol.GenerationAck{Gen: ack.Gen})
	none[*protocol.Instruction](t, fd.barrier(), "an instruction after an old generationAck", nil)
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	if in := fd.instructionFor(next.ID); in.Gen != fd.gen {
		t.Fatalf("instruction stamped gen %s, want %s", in.Gen, fd.gen)
	}
}

// R11: a cancel demands a terminal within the cancel grace; it is
// idempotent, delivered at most once per generation, replayed after a
// same-epoch reconnect with its grace restarted; a queued call is
// cancelled not_started without ever being sent.
func TestR11Cancel(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("sleep 100"))
		fd.instructionFor(call.ID)
		call.Cancel()
		fd.expectCancel(call.ID)
		call.Cancel()
		call.Cancel()
		none[*protocol.Cancel](t, fd.barrier(), "a second cancel in one generation", nil)
		fd.result(call.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
		fd.expectResultAck(call.ID)
		s := settled(t, call)
		if c, ok := s.Outcome.(protocol.CancelledOutcome); !ok || c.State != protocol.CancelKilled || s.State != protocol.StateTerminal {
			t.Fatalf("settlement %+v", s)
		}
		call.Cancel() // after the settlement: a no-op
	})
	t.Run("grace expiry", func(t *testing.T) {
		l := newWSLane(t)
		grace := l.srv.cfg.CancelGrace
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("sleep 100"))
		fd.instructionFor(call.ID)
		call.Cancel()
		fd.expectCancel(call.ID)
		l.clk.Advance(grace - time.Millisecond)
		if isSettled(call) {
			t.Fatal("settled inside the cancel grace")
		}
		l.clk.Advance(time.Millisecond)
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("replayed after a same-epoch reconnect, grace restarted", func(t *testing.T) {
		l := newWSLane(t)
		grace := l.srv.cfg.CancelGrace
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("sleep 100"))
		fd.instructionFor(call.ID)
		call.Cancel()
		fd.expectCancel(call.ID)
		l.clk.Advance(grace / 2)
		fd.drop() // the cancel may never have arrived
		fd.connect()
		none[*protocol.Cancel](t, fd.barrier(), "a cancel before generationAck", nil)
		fd.send(&protocol.GenerationAck{Gen: fd.gen})
		fd.expectCancel(call.ID) // the first active tick replays it, stamped with the new gen
		l.clk.Advance(grace - time.Millisecond)
		if isSettled(call) {
			t.Fatal("the replay did not restart the cancel grace")
		}
		l.clk.Advance(time.Millisecond)
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("requested while disconnected, delivered on the reconnect", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("sleep 100"))
		fd.instructionFor(call.ID)
		fd.drop()
		call.Cancel()
		fd.establish()
		fd.expectCancel(call.ID)
		fd.result(call.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
		fd.expectResultAck(call.ID)
		settled(t, call)
	})
	t.Run("a queued call is cancelled not_started and never sent", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.MaxInflight = 1 })
		fd := l.enroll()
		fd.establish()
		running := l.dispatch(fd, execInstr("a"))
		queued := l.dispatch(fd, execInstr("b"))
		fd.instructionFor(running.ID)
		queued.Cancel()
		s := settled(t, queued)
		if c, ok := s.Outcome.(protocol.CancelledOutcome); !ok || c.State != protocol.CancelNotStarted || s.State != protocol.StateTerminalNeverStarted {
			t.Fatalf("settlement %+v, want terminal_never_started cancelled not_started", s)
		}
		fd.answerExec(running.ID, 0)
		after := l.dispatch(fd, execInstr("c"))
		if in := fd.instruction(); in.InstructionID != after.ID {
			t.Fatalf("the lane sent %s after the slot freed, want %s", in.InstructionID, after.ID)
		}
		none[*protocol.Instruction](t, fd.barrier(), "the cancelled queued instruction", nil)
	})
}

// R12: the server's backstop: timeoutMs + the execution grace settles
// outcome_unknown; it keeps running through a disconnect.
func TestR12ExecutionCeiling(t *testing.T) {
	l := newWSLane(t)
	grace := l.srv.cfg.ExecutionGrace
	fd := l.enroll()
	fd.establish()
	in := Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "hang"}, Timeout: 1500 * time.Millisecond}
	call := l.dispatch(fd, in)
	if got := fd.instructionFor(call.ID); got.TimeoutMs != 1500 {
		t.Fatalf("timeoutMs %d, want 1500", got.TimeoutMs)
	}
	l.clk.Advance(1500*time.Millisecond + grace - time.Millisecond)
	if isSettled(call) {
		t.Fatal("settled before timeoutMs + grace")
	}
	l.clk.Advance(time.Millisecond)
	f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if !strings.Contains(f.Message, "1500") {
		t.Fatalf("message %q", f.Message)
	}
	fd.expectCancel(call.ID)
	fd.result(call.ID, 0, protocol.Failure{ErrorCode: protocol.ErrTimeout, Message: "killed at 1.5 s"})
	fd.expectResultAck(call.ID)
	if settled(t, call).Outcome.(protocol.Failure).ErrorCode != protocol.ErrOutcomeUnknown {
		t.Fatal("a late result overturned the backstop")
	}
	// Through a disconnect, inside the reconnect grace.
	held := l.dispatch(fd, in)
	fd.instructionFor(held.ID)
	fd.drop()
	l.clk.Advance(1500*time.Millisecond + grace)
	wantFailure(t, settled(t, held), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if ack := fd.connect(); len(ack.PendingInstructions) != 0 {
		t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
	}
}
