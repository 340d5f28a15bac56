package lane_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// R9: a frame whose gen is not this socket's negotiated one, or that comes
// on a socket no longer current, is dropped generation_mismatch, no ack.
func TestR9OldGenerationFramesAreVoid(t *testing.T) {
	r, fe := connected(t)
	call := fe.start(lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
	g1 := fe.gen
	fe.chunk(call.ID, 0, protocol.ChunkStdout, "a")
	fe.expectChunkAck(call.ID, 0)

	fe.drop()
	fe.establish()
	old := &protocol.Chunk{Gen: g1, InstructionID: call.ID, StreamSeq: 1, Kind: protocol.ChunkStdout, Data: []byte("old")}
	fe.send(old)
	fe.send(&protocol.Result{Gen: g1, InstructionID: call.ID, DeviceSeq: 0, Outcome: protocol.ExecOutcome{}})
	fe.send(&protocol.Result{Gen: fe.gen + 1, InstructionID: call.ID, DeviceSeq: 0, Outcome: protocol.ExecOutcome{}})
	fe.send(&protocol.Goodbye{Gen: g1, Reason: protocol.GoodbyeShutdown})
	fe.send(&protocol.Heartbeat{Gen: g1, Seq: 9})
	frames := fe.barrier()
	none[*protocol.ChunkAck](t, frames, "chunkAck for an old-gen chunk", nil)
	none[*protocol.ResultAck](t, frames, "resultAck for an old-gen result", func(a *protocol.ResultAck) bool { return a.InstructionID == call.ID })
	r.wantRefused(slices.Repeat([]string{"generation_mismatch"}, 5)...)
	if p := r.Presence(fe.id); isSettled(call) || !p.Online || p.Leaving || p.Gen != fe.gen {
		t.Fatalf("an old-gen frame acted: settled %v, presence %+v", isSettled(call), p)
	}
	// Frames on a socket that is no longer the device's current connection.
	stale, _ := fe.supersede(false)
	fe.send(&protocol.GenerationAck{Gen: fe.gen})
	stale.send(&protocol.Chunk{Gen: stale.gen, InstructionID: call.ID, StreamSeq: 1, Kind: protocol.ChunkStdout, Data: []byte("x")})
	stale.send(&protocol.Result{Gen: stale.gen, InstructionID: call.ID, DeviceSeq: 1, Outcome: protocol.ExecOutcome{}})
	stale.send(&protocol.GenerationAck{Gen: stale.gen})
	stale.fence()
	refused := r.refusals()
	fenced := refused["pre_hello"] // the fence itself, if it was handled yet
	if refused["generation_mismatch"] != 8 || fenced > 1 || len(refused) != 1+min(int(fenced), 1) {
		t.Fatalf("frames refused %v, want 8 generation_mismatch (and the fence's pre_hello)", refused)
	}
	if bye := await[*protocol.Bye](stale, nil); bye.Reason != protocol.ByeSuperseded {
		t.Fatalf("bye %+v to the superseded socket", bye)
	}
	stale.expectClosed()
	if isSettled(call) {
		t.Fatal("a stale socket's result settled the call")
	}
	// The current gen is still heard.
	fe.chunk(call.ID, 1, protocol.ChunkStdout, "b")
	fe.expectChunkAck(call.ID, 1)
}

// R10: given helloAck(G), nothing is dispatched before generationAck for
// exactly G.
func TestR10NothingDispatchedBeforeGenerationAck(t *testing.T) {
	r := newRig(t)
	fe := r.enroll()
	// A connection before this one leaves the barrier's instruction.
	fe.establish()
	fe.plant()
	fe.drop()
	ack := fe.connect()
	call := r.dispatch(fe, execIn("x"))
	wantQueued(t, r, call, "before generationAck")
	fe.send(&protocol.GenerationAck{Gen: ack.Gen + 1})
	fe.send(&protocol.GenerationAck{Gen: ack.Gen - 1})
	fe.send(&protocol.Heartbeat{Gen: ack.Gen})
	none[*protocol.Instruction](t, fe.barrier(), "an instruction before generationAck", nil)
	wantQueued(t, r, call, "after a wrong generationAck")
	r.wantRefused("generation_mismatch", "generation_mismatch")
	fe.send(&protocol.GenerationAck{Gen: ack.Gen})
	in := fe.instructionFor(call.ID)
	if in.Gen != ack.Gen || in.IssuedSeq != 1 {
		t.Fatalf("instruction gen %s issuedSeq %d", in.Gen, in.IssuedSeq)
	}
	// A repeated generationAck changes nothing.
	fe.send(&protocol.GenerationAck{Gen: ack.Gen})
	none[*protocol.Instruction](t, fe.barrier(), "a second instruction", nil)
	// After a reconnect, the old generation's ack opens nothing.
	fe.drop()
	fe.connect()
	next := r.dispatch(fe, execIn("y"))
	fe.send(&protocol.GenerationAck{Gen: ack.Gen})
	none[*protocol.Instruction](t, fe.barrier(), "an instruction after an old generationAck", nil)
	fe.send(&protocol.GenerationAck{Gen: fe.gen})
	if in := fe.instructionFor(next.ID); in.Gen != fe.gen {
		t.Fatalf("instruction stamped gen %s, want %s", in.Gen, fe.gen)
	}
}

// wantQueued checks the call, the lane's only one, waits for a slot: it is
// neither settled nor in flight.
func wantQueued(t *testing.T, r *rig, call *lane.Call, when string) {
	t.Helper()
	if m := r.Metrics(); isSettled(call) || m.Queued != 1 || m.Inflight != 0 {
		t.Fatalf("%s: settled %v, %d queued, %d in flight; want the call queued", when, isSettled(call), m.Queued, m.Inflight)
	}
}

// R11: a cancel demands a terminal within the cancel grace; it is
// idempotent, delivered at most once per generation, replayed after a
// same-epoch reconnect with its grace restarted; a queued call is
// cancelled not_started without ever being sent.
func TestR11Cancel(t *testing.T) {
	t.Run("answered", func(t *testing.T) {
		_, fe := connected(t)
		call := fe.start(execIn("sleep 100"))
		call.Cancel()
		fe.expectCancel(call.ID)
		call.Cancel()
		call.Cancel()
		none[*protocol.Cancel](t, fe.barrier(), "a second cancel in one generation", nil)
		fe.result(call.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
		fe.expectResultAck(call.ID)
		s := settled(t, call)
		if c, ok := s.Outcome.(protocol.CancelledOutcome); !ok || c.State != protocol.CancelKilled || s.State != protocol.StateTerminal {
			t.Fatalf("settlement %+v", s)
		}
		call.Cancel() // after the settlement: a no-op
	})
	t.Run("grace expiry", func(t *testing.T) {
		r, fe := connected(t)
		grace := r.Config().CancelGrace
		call := fe.start(execIn("sleep 100"))
		call.Cancel()
		fe.expectCancel(call.ID)
		r.clk.Advance(grace - time.Millisecond)
		if isSettled(call) {
			t.Fatal("settled inside the cancel grace")
		}
		r.clk.Advance(time.Millisecond)
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("replayed after a same-epoch reconnect, grace restarted", func(t *testing.T) {
		r, fe := connected(t)
		grace := r.Config().CancelGrace
		call := fe.start(execIn("sleep 100"))
		call.Cancel()
		fe.expectCancel(call.ID)
		r.clk.Advance(grace / 2)
		fe.drop() // the cancel may never have arrived
		fe.connect()
		none[*protocol.Cancel](t, fe.barrier(), "a cancel before generationAck", nil)
		fe.send(&protocol.GenerationAck{Gen: fe.gen})
		fe.expectCancel(call.ID) // the first active tick replays it, stamped with the new gen
		r.clk.Advance(grace - time.Millisecond)
		if isSettled(call) {
			t.Fatal("the replay did not restart the cancel grace")
		}
		r.clk.Advance(time.Millisecond)
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("requested while disconnected, delivered on the reconnect", func(t *testing.T) {
		_, fe := connected(t)
		call := fe.start(execIn("sleep 100"))
		fe.drop()
		call.Cancel()
		fe.establish()
		fe.expectCancel(call.ID)
		fe.result(call.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
		fe.expectResultAck(call.ID)
		settled(t, call)
	})
	t.Run("a queued call is cancelled not_started and never sent", func(t *testing.T) {
		r, fe := connected(t, func(c *lane.Config) { c.MaxInflight = 1 })
		running := r.dispatch(fe, execIn("a"))
		queued := r.dispatch(fe, execIn("b"))
		fe.instructionFor(running.ID)
		queued.Cancel()
		s := settled(t, queued)
		if c, ok := s.Outcome.(protocol.CancelledOutcome); !ok || c.State != protocol.CancelNotStarted || s.State != protocol.StateTerminalNeverStarted {
			t.Fatalf("settlement %+v, want terminal_never_started cancelled not_started", s)
		}
		fe.answerExec(running.ID, 0)
		after := r.dispatch(fe, execIn("c"))
		if in := fe.instruction(); in.InstructionID != after.ID {
			t.Fatalf("the lane sent %s after the slot freed, want %s", in.InstructionID, after.ID)
		}
		none[*protocol.Instruction](t, fe.barrier(), "the cancelled queued instruction", nil)
	})
}

// R12: the server's backstop: timeoutMs + the execution grace settles
// outcome_unknown; it keeps running through a disconnect.
func TestR12ExecutionCeiling(t *testing.T) {
	r, fe := connected(t)
	grace := r.Config().ExecutionGrace
	in := lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "hang"}, Timeout: 1500 * time.Millisecond}
	call := r.dispatch(fe, in)
	if got := fe.instructionFor(call.ID); got.TimeoutMs != 1500 {
		t.Fatalf("timeoutMs %d, want 1500", got.TimeoutMs)
	}
	r.clk.Advance(1500*time.Millisecond + grace - time.Millisecond)
	if isSettled(call) {
		t.Fatal("settled before timeoutMs + grace")
	}
	r.clk.Advance(time.Millisecond)
	f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if !strings.Contains(f.Message, "1500") {
		t.Fatalf("message %q", f.Message)
	}
	fe.expectCancel(call.ID)
	fe.result(call.ID, 0, protocol.Failure{ErrorCode: protocol.ErrTimeout, Message: "killed at 1.5 s"})
	fe.expectResultAck(call.ID)
	if settled(t, call).Outcome.(protocol.Failure).ErrorCode != protocol.ErrOutcomeUnknown {
		t.Fatal("a late result overturned the backstop")
	}
	// Through a disconnect, inside the reconnect grace.
	held := fe.start(in)
	fe.drop()
	r.clk.Advance(1500*time.Millisecond + grace)
	wantFailure(t, settled(t, held), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if ack := fe.connect(); len(ack.PendingInstructions) != 0 {
		t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
	}
}
