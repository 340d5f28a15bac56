package lane_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// The reliability rules of §5.2, each as given / when / then.

// R1: given the server wrote the instruction frame for I, when the
// connection drops at any moment afterwards, then I is never sent again.
func TestR1CommittedInstructionIsNeverResent(t *testing.T) {
	r, fe := connected(t)
	// Given: I was written.
	call := r.dispatch(fe, execIn("make deploy"))
	in := fe.instructionFor(call.ID)
	// When: the socket drops and the same process reconnects.
	fe.drop()
	ack := fe.connect()
	if !slices.Equal(ack.PendingInstructions, []string{in.InstructionID}) {
		t.Fatalf("pendingInstructions %q, want [%s]", ack.PendingInstructions, in.InstructionID)
	}
	fe.send(&protocol.GenerationAck{Gen: fe.gen})
	next := r.dispatch(fe, execIn("true"))
	// Then: the next instruction written is the new one, and I is never re-sent.
	got := fe.instruction()
	if got.InstructionID != next.ID || got.IssuedSeq != 1 {
		t.Fatalf("after the reconnect the lane sent %s (issuedSeq %d), want %s with issuedSeq 1", got.InstructionID, got.IssuedSeq, next.ID)
	}
	none[*protocol.Instruction](t, fe.barrier(), "a re-sent instruction", nil)
	// The one copy the device holds still settles it, under the new gen.
	fe.answerExec(in.InstructionID, 0)
	if s := settled(t, call); s.State != protocol.StateTerminal || !s.Outcome.OK() {
		t.Fatalf("settlement %+v", s)
	}
	// And a new epoch does not re-send it either.
	fe.answerExec(got.InstructionID, 0)
	fe.start(execIn("sleep 9"))
	fe.drop()
	fe.restart()
	fe.establish()
	none[*protocol.Instruction](t, fe.barrier(), "a re-sent instruction after a new epoch", nil)
}

// R2: given I dispatched and the socket dropped, when the device
// reconnects with the same epoch, then helloAck lists I with its
// watermark; after generationAck the device resumes under the new gen.
func TestR2SameEpochReconnectResumes(t *testing.T) {
	r := newRig(t)
	fe := r.enroll()
	first := fe.establish()
	i := r.dispatch(fe, execIn("build"))
	j := r.dispatch(fe, execIn("test"))
	fe.instructionFor(i.ID)
	fe.instructionFor(j.ID)
	fe.chunk(i.ID, 0, protocol.ChunkStdout, "a")
	fe.expectChunkAck(i.ID, 0)
	fe.chunk(i.ID, 1, protocol.ChunkStdout, "b")
	fe.expectChunkAck(i.ID, 1)
	fe.chunk(i.ID, 3, protocol.ChunkStdout, "d") // buffered behind the gap at 2
	fe.expectChunkAck(i.ID, 1)

	fe.drop()
	ack := fe.connect()
	if ack.Gen <= first.Gen {
		t.Fatalf("gen %s after gen %s: a reconnect must get a new generation", ack.Gen, first.Gen)
	}
	if !slices.Equal(ack.PendingInstructions, []string{i.ID, j.ID}) {
		t.Fatalf("pendingInstructions %q, want [%s %s] in dispatch order", ack.PendingInstructions, i.ID, j.ID)
	}
	if len(ack.ChunkWatermarks) != 2 || ack.ChunkWatermarks[i.ID] != 1 || ack.ChunkWatermarks[j.ID] != -1 {
		t.Fatalf("chunkWatermarks %v, want {%s: 1, %s: -1}", ack.ChunkWatermarks, i.ID, j.ID)
	}
	fe.send(&protocol.GenerationAck{Gen: fe.gen})
	// Re-send from the watermark, re-stamped with the new gen.
	fe.chunk(i.ID, 1, protocol.ChunkStdout, "b")
	fe.expectChunkAck(i.ID, 1)
	fe.chunk(i.ID, 2, protocol.ChunkStdout, "c")
	fe.expectChunkAck(i.ID, 3) // the chunk buffered before the drop still counts
	fe.exit(i.ID, 4, 0)
	fe.expectChunkAck(i.ID, 4)
	fe.result(i.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(i.ID)
	chunks, s := callEvents(t, i)
	var out string
	for _, c := range chunks[:4] {
		out += string(c.Data)
	}
	if out != "abcd" || chunks[4].Kind != protocol.ChunkExit || s.State != protocol.StateTerminal {
		t.Fatalf("resumed stream %q, %d chunks, %+v", out, len(chunks), s)
	}
	fe.answerExec(j.ID, 3)
	if s := settled(t, j); s.Outcome.(protocol.ExecOutcome).ExitCode != 3 {
		t.Fatalf("j settled %+v", s)
	}
}

// R3: given I in flight, when the device reconnects with a new epoch, then
// I settles outcome_unknown before helloAck and is not listed; a late
// result is answered by a bare resultAck from the memo, a late chunk is
// dropped.
func TestR3NewEpochAbandonsInFlightBeforeHelloAck(t *testing.T) {
	r, fe := connected(t)
	call := fe.start(execIn("rm -rf build"))
	fe.chunk(call.ID, 0, protocol.ChunkStdout, "removing")
	fe.expectChunkAck(call.ID, 0)
	fe.drop()
	fe.restart()
	ack := fe.connect()
	// Settled before helloAck was written: no wait here.
	if !isSettled(call) {
		t.Fatal("helloAck arrived while the abandoned instruction was still in flight")
	}
	if len(ack.PendingInstructions) != 0 || len(ack.ChunkWatermarks) != 0 {
		t.Fatalf("helloAck lists %v / %v after a new epoch", ack.PendingInstructions, ack.ChunkWatermarks)
	}
	f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if !strings.Contains(f.Message, "epoch") {
		t.Fatalf("message %q does not say why", f.Message)
	}
	fe.send(&protocol.GenerationAck{Gen: fe.gen})
	// A late result: acked, believed by nobody.
	fe.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(call.ID)
	// A late chunk: silently ignored, no chunkAck and no refusal.
	fe.chunk(call.ID, 1, protocol.ChunkStdout, "late")
	none[*protocol.ChunkAck](t, fe.barrier(), "chunkAck for a settled instruction", nil)
	r.wantRefused()
	if s := settled(t, call); s.Outcome.OK() {
		t.Fatalf("the late result overturned the settlement: %+v", s)
	}
	chunks, _ := callEvents(t, call)
	if len(chunks) != 1 || string(chunks[0].Data) != "removing" {
		t.Fatalf("the caller saw %d chunks, want only the one before the restart", len(chunks))
	}
}

// R4: given the socket dropped with I in flight, when no connection is
// established within the reconnect grace, then I settles outcome_unknown
// (and what was only queued, target_unavailable never started).
func TestR4ReconnectGrace(t *testing.T) {
	r, fe := connected(t, func(c *lane.Config) { c.MaxInflight = 1 })
	grace := r.Config().ReconnectGrace
	long := lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "deploy"}, Timeout: time.Hour}
	i := r.dispatch(fe, long)
	q := r.dispatch(fe, long)
	fe.instructionFor(i.ID)
	fe.drop()
	r.clk.Advance(grace - time.Millisecond)
	if isSettled(i) || isSettled(q) {
		t.Fatal("settled before the reconnect grace ran out")
	}
	r.clk.Advance(time.Millisecond)
	f := wantFailure(t, settled(t, i), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if !strings.Contains(f.Message, "reconnect") {
		t.Fatalf("message %q", f.Message)
	}
	wantFailure(t, settled(t, q), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	// A later same-epoch reconnect does not list it; its result is memo-acked only.
	ack := fe.connect()
	if len(ack.PendingInstructions) != 0 {
		t.Fatalf("pendingInstructions %v after the grace", ack.PendingInstructions)
	}
	fe.send(&protocol.GenerationAck{Gen: fe.gen})
	fe.result(i.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(i.ID)
	if settled(t, i).Outcome.OK() {
		t.Fatal("a late result was believed")
	}
	// The queued call was never committed: a result for it is unknown.
	fe.result(q.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	none[*protocol.ResultAck](t, fe.barrier(), "resultAck for a never-started instruction", func(a *protocol.ResultAck) bool { return a.InstructionID == q.ID })
	r.wantRefused("unknown_instruction")
}

// R4, the other side: a reconnect inside the grace stops it.
func TestR4ReconnectWithinGraceKeepsTheBooksOpen(t *testing.T) {
	r, fe := connected(t)
	cfg := r.Config()
	i := fe.start(lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "long"}, Timeout: time.Hour})
	fe.drop()
	r.clk.Advance(cfg.ReconnectGrace / 2)
	fe.establish()
	for elapsed := time.Duration(0); elapsed < cfg.ReconnectGrace; elapsed += cfg.HeartbeatInterval {
		r.clk.Advance(cfg.HeartbeatInterval)
		fe.send(&protocol.Heartbeat{Gen: fe.gen, Seq: int64(elapsed), Inflight: []string{i.ID}})
		fe.barrier()
	}
	if isSettled(i) {
		t.Fatalf("settled %+v although the device came back within the grace", settled(t, i))
	}
	fe.answerExec(i.ID, 0)
	settled(t, i)
}
