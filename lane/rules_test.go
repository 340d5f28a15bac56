package lane

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// The reliability rules of §5.2, each as given / when / then.

// R1: given the server wrote the instruction frame for I, when the
// connection drops at any moment afterwards, then I is never sent again.
func TestR1CommittedInstructionIsNeverResent(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	// Given: I was written.
	call := l.dispatch(fd, execInstr("make deploy"))
	in := fd.instructionFor(call.ID)
	// When: the socket drops and the same process reconnects.
	fd.drop()
	ack := fd.connect()
	if !slices.Equal(ack.PendingInstructions, []string{in.InstructionID}) {
		t.Fatalf("pendingInstructions %q, want [%s]", ack.PendingInstructions, in.InstructionID)
	}
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	next := l.dispatch(fd, execInstr("true"))
	// Then: the next instruction written is the new one, and I is never re-sent.
	got := fd.instruction()
	if got.InstructionID != next.ID || got.IssuedSeq != 1 {
		t.Fatalf("after the reconnect the lane sent %s (issuedSeq %d), want %s with issuedSeq 1", got.InstructionID, got.IssuedSeq, next.ID)
	}
	none[*protocol.Instruction](t, fd.barrier(), "a re-sent instruction", nil)
	// The one copy the device holds still settles it, under the new gen.
	fd.answerExec(in.InstructionID, 0)
	if s := settled(t, call); s.State != protocol.StateTerminal || !s.Outcome.OK() {
		t.Fatalf("settlement %+v", s)
	}
	// And a new epoch does not re-send it either.
	fd.answerExec(got.InstructionID, 0)
	held := l.dispatch(fd, execInstr("sleep 9"))
	fd.instructionFor(held.ID)
	fd.drop()
	fd.restart()
	fd.establish()
	none[*protocol.Instruction](t, fd.barrier(), "a re-sent instruction after a new epoch", nil)
}

// R2: given I dispatched and the socket dropped, when the device
// reconnects with the same epoch, then helloAck lists I with its
// watermark; after generationAck the device resumes under the new gen.
func TestR2SameEpochReconnectResumes(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	first := fd.establish()
	i := l.dispatch(fd, execInstr("build"))
	j := l.dispatch(fd, execInstr("test"))
	fd.instructionFor(i.ID)
	fd.instructionFor(j.ID)
	fd.chunk(i.ID, 0, protocol.ChunkStdout, "a")
	fd.expectChunkAck(i.ID, 0)
	fd.chunk(i.ID, 1, protocol.ChunkStdout, "b")
	fd.expectChunkAck(i.ID, 1)
	fd.chunk(i.ID, 3, protocol.ChunkStdout, "d") // buffered behind the gap at 2
	fd.expectChunkAck(i.ID, 1)

	fd.drop()
	ack := fd.connect()
	if ack.Gen <= first.Gen {
		t.Fatalf("gen %s after gen %s: a reconnect must get a new generation", ack.Gen, first.Gen)
	}
	if !slices.Equal(ack.PendingInstructions, []string{i.ID, j.ID}) {
		t.Fatalf("pendingInstructions %q, want [%s %s] in dispatch order", ack.PendingInstructions, i.ID, j.ID)
	}
	if len(ack.ChunkWatermarks) != 2 || ack.ChunkWatermarks[i.ID] != 1 || ack.ChunkWatermarks[j.ID] != -1 {
		t.Fatalf("chunkWatermarks %v, want {%s: 1, %s: -1}", ack.ChunkWatermarks, i.ID, j.ID)
	}
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	// Re-send from the watermark, re-stamped with the new gen.
	fd.chunk(i.ID, 1, protocol.ChunkStdout, "b")
	fd.expectChunkAck(i.ID, 1)
	fd.chunk(i.ID, 2, protocol.ChunkStdout, "c")
	fd.expectChunkAck(i.ID, 3) // the chunk buffered before the drop still counts
	fd.exit(i.ID, 4, 0)
	fd.expectChunkAck(i.ID, 4)
	fd.result(i.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(i.ID)
	chunks, s := events(t, i)
	var out string
	for _, c := range chunks[:4] {
		out += string(c.Data)
	}
	if out != "abcd" || chunks[4].Kind != protocol.ChunkExit || s.State != protocol.StateTerminal {
		t.Fatalf("resumed stream %q, %d chunks, %+v", out, len(chunks), s)
	}
	fd.answerExec(j.ID, 3)
	if s := settled(t, j); s.Outcome.(protocol.ExecOutcome).ExitCode != 3 {
		t.Fatalf("j settled %+v", s)
	}
}

// R3: given I in flight, when the device reconnects with a new epoch, then
// I settles outcome_unknown before helloAck and is not listed; a late
// result is answered by a bare resultAck from the memo, a late chunk is
// dropped.
func TestR3NewEpochAbandonsInFlightBeforeHelloAck(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("rm -rf build"))
	fd.instructionFor(call.ID)
	fd.chunk(call.ID, 0, protocol.ChunkStdout, "removing")
	fd.expectChunkAck(call.ID, 0)
	fd.drop()
	fd.restart()
	ack := fd.connect()
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
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	// A late result: acked, believed by nobody.
	fd.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(call.ID)
	// A late chunk: silently ignored, no chunkAck and no refusal.
	fd.chunk(call.ID, 1, protocol.ChunkStdout, "late")
	none[*protocol.ChunkAck](t, fd.barrier(), "chunkAck for a settled instruction", nil)
	l.wantRejected(fd.id)
	if s := settled(t, call); s.Outcome.OK() {
		t.Fatalf("the late result overturned the settlement: %+v", s)
	}
	chunks, _ := events(t, call)
	if len(chunks) != 1 || string(chunks[0].Data) != "removing" {
		t.Fatalf("the caller saw %d chunks, want only the one before the restart", len(chunks))
	}
}

// R4: given the socket dropped with I in flight, when no connection is
// established within the reconnect grace, then I settles outcome_unknown
// (and what was only queued, target_unavailable never started).
func TestR4ReconnectGrace(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 1 })
	grace := l.srv.cfg.ReconnectGrace
	fd := l.enroll()
	fd.establish()
	long := Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "deploy"}, Timeout: time.Hour}
	i := l.dispatch(fd, long)
	q := l.dispatch(fd, long)
	fd.instructionFor(i.ID)
	fd.drop()
	l.clk.Advance(grace - time.Millisecond)
	if isSettled(i) || isSettled(q) {
		t.Fatal("settled before the reconnect grace ran out")
	}
	l.clk.Advance(time.Millisecond)
	f := wantFailure(t, settled(t, i), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	if !strings.Contains(f.Message, "reconnect") {
		t.Fatalf("message %q", f.Message)
	}
	wantFailure(t, settled(t, q), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	// A later same-epoch reconnect does not list it; its result is memo-acked only.
	ack := fd.connect()
	if len(ack.PendingInstructions) != 0 {
		t.Fatalf("pendingInstructions %v after the grace", ack.PendingInstructions)
	}
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	fd.result(i.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(i.ID)
	if settled(t, i).Outcome.OK() {
		t.Fatal("a late result was believed")
	}
	// The queued call was never committed: a result for it is unknown.
	fd.result(q.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	none[*protocol.ResultAck](t, fd.barrier(), "resultAck for a never-started instruction", func(a *protocol.ResultAck) bool { return a.InstructionID == q.ID })
	l.wantRejected(fd.id, "unknown_instruction")
}

// R4, the other side: a reconnect inside the grace stops it.
func TestR4ReconnectWithinGraceKeepsTheBooksOpen(t *testing.T) {
	l := newWSLane(t)
	grace := l.srv.cfg.ReconnectGrace
	fd := l.enroll()
	fd.establish()
	i := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "long"}, Timeout: time.Hour})
	fd.instructionFor(i.ID)
	fd.drop()
	l.clk.Advance(grace / 2)
	fd.establish()
	for elapsed := time.Duration(0); elapsed < grace; elapsed += l.srv.cfg.HeartbeatInterval {
		l.clk.Advance(l.srv.cfg.HeartbeatInterval)
		fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: int64(elapsed), Inflight: []string{i.ID}})
		fd.barrier()
	}
	if isSettled(i) {
		t.Fatalf("settled %+v although the device came back within the grace", settled(t, i))
	}
	fd.answerExec(i.ID, 0)
	settled(t, i)
}

// R5: a lost resultAck: the re-sent result is processed if I is open, acked
// from the memo if I settled for any reason, and refused
// unknown_instruction without an ack once I aged out of the 512-entry memo.
func TestR5LostResultAck(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	// (b) settled by its own result: the resend is acked and changes nothing.
	i := l.dispatch(fd, execInstr("true"))
	fd.instructionFor(i.ID)
	fd.answerExec(i.ID, 0)
	fd.result(i.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(i.ID)
	// (b) settled for a reason the device did not cause (the ceiling).
	j := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Second})
	fd.instructionFor(j.ID)
	l.clk.Advance(time.Second + l.srv.cfg.ExecutionGrace)
	wantFailure(t, settled(t, j), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	fd.exit(j.ID, 0, 0)
	fd.result(j.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(j.ID)
	if settled(t, j).Outcome.OK() {
		t.Fatal("a result after the ceiling overturned the settlement")
	}
	// (c) aged out: j is the most recent settled; 511 more keep it, the 512th evicts it.
	if l.srv.cfg.SettledMemo != 512 {
		t.Fatalf("SettledMemo %d, want the spec's 512", l.srv.cfg.SettledMemo)
	}
	settleOne := func() {
		c := l.dispatch(fd, execInstr("true"))
		fd.instructionFor(c.ID)
		fd.result(c.ID, 0, protocol.Failure{ErrorCode: protocol.ErrSpawnError, Message: "no"})
		fd.expectResultAck(c.ID)
		settled(t, c)
	}
	for range 511 {
		settleOne()
	}
	fd.result(j.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(j.ID) // still the 512th most recent
	settleOne()
	fd.result(j.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.chunk(j.ID, 1, protocol.ChunkStdout, "late")
	frames := fd.barrier()
	none[*protocol.ResultAck](t, frames, "resultAck for an aged-out instruction", func(a *protocol.ResultAck) bool { return a.InstructionID == j.ID })
	none[*protocol.ChunkAck](t, frames, "chunkAck for an aged-out instruction", nil)
	l.wantRejected(fd.id, "unknown_instruction", "unknown_instruction")
}

// R6: a result with deviceSeq ≤ the accepted one is re-acked and absorbed
// without touching the outcome.
func TestR6DeviceSeqIdempotence(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("true"))
	fd.instructionFor(call.ID)
	fd.exit(call.ID, 0, 7)
	fd.expectChunkAck(call.ID, 0)
	fd.result(call.ID, 4, protocol.ExecOutcome{ExitCode: 7})
	fd.expectResultAck(call.ID)
	for _, seq := range []int64{4, 3, 0} {
		fd.result(call.ID, seq, protocol.Failure{ErrorCode: protocol.ErrUnknown, Message: "retransmission"})
		fd.expectResultAck(call.ID)
	}
	// A higher deviceSeq after the settlement is no new terminal either.
	fd.result(call.ID, 5, protocol.Failure{ErrorCode: protocol.ErrUnknown, Message: "second opinion"})
	fd.expectResultAck(call.ID)
	s := settled(t, call)
	if e, ok := s.Outcome.(protocol.ExecOutcome); !ok || e.ExitCode != 7 {
		t.Fatalf("settlement %+v, want the first accepted result (exitCode 7)", s)
	}
}

// R7: chunks at or below the watermark are absorbed and re-acked; a
// buffered seq is first-write-wins.
func TestR7ChunkResendIsIdempotent(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("cat"))
	fd.instructionFor(call.ID)
	for seq, data := range []string{"a", "b", "c"} {
		fd.chunk(call.ID, int64(seq), protocol.ChunkStdout, data)
		fd.expectChunkAck(call.ID, int64(seq))
	}
	fd.chunk(call.ID, 1, protocol.ChunkStdout, "b")
	fd.expectChunkAck(call.ID, 2)
	fd.chunk(call.ID, 0, protocol.ChunkStdout, "DIFFERENT")
	fd.expectChunkAck(call.ID, 2)
	fd.chunk(call.ID, 4, protocol.ChunkStdout, "first")
	fd.expectChunkAck(call.ID, 2)
	fd.chunk(call.ID, 4, protocol.ChunkStdout, "second")
	fd.expectChunkAck(call.ID, 2)
	fd.chunk(call.ID, 3, protocol.ChunkStdout, "d")
	fd.expectChunkAck(call.ID, 4)
	fd.exit(call.ID, 5, 0)
	fd.expectChunkAck(call.ID, 5)
	fd.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(call.ID)
	chunks, s := events(t, call)
	var got []string
	for _, c := range chunks {
		got = append(got, string(c.Data))
	}
	if want := []string{"a", "b", "c", "d", "first", ""}; !slices.Equal(got, want) || !s.Outcome.OK() {
		t.Fatalf("stream %q (%+v), want %q", got, s, want)
	}
}

// R8: a gap not filled within the gap timeout fails the instruction
// outcome_unknown; so does a reorder-buffer overflow (64 entries, 2 MiB).
func TestR8GapIsAFailure(t *testing.T) {
	t.Run("gap timeout", func(t *testing.T) {
		l := newWSLane(t)
		gap := l.srv.cfg.GapTimeout
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
		fd.instructionFor(call.ID)
		fd.chunk(call.ID, 1, protocol.ChunkStdout, "b") // 0 is missing
		fd.expectChunkAck(call.ID, -1)
		l.clk.Advance(gap - time.Millisecond)
		fd.chunk(call.ID, 2, protocol.ChunkStdout, "c") // no progress: the timer keeps running
		fd.expectChunkAck(call.ID, -1)
		if isSettled(call) {
			t.Fatal("settled before the gap timeout")
		}
		l.clk.Advance(time.Millisecond)
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "streamSeq 0") {
			t.Fatalf("message %q", f.Message)
		}
		fd.expectCancel(call.ID) // the lane tells the device to stop work it wrote off
		// The gap filled now is too late: no ack.
		fd.chunk(call.ID, 0, protocol.ChunkStdout, "a")
		none[*protocol.ChunkAck](t, fd.barrier(), "chunkAck after the gap failure", nil)
	})
	t.Run("progress restarts the gap timer", func(t *testing.T) {
		l := newWSLane(t)
		gap := l.srv.cfg.GapTimeout
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
		fd.instructionFor(call.ID)
		fd.chunk(call.ID, 1, protocol.ChunkStdout, "b")
		fd.expectChunkAck(call.ID, -1)
		l.clk.Advance(gap - time.Millisecond)
		fd.chunk(call.ID, 0, protocol.ChunkStdout, "a")
		fd.expectChunkAck(call.ID, 1)
		fd.chunk(call.ID, 3, protocol.ChunkStdout, "d") // a new gap, at 2
		fd.expectChunkAck(call.ID, 1)
		l.clk.Advance(gap - time.Millisecond)
		if isSettled(call) {
			t.Fatal("the first gap's timer failed a stream whose gap was filled")
		}
		l.clk.Advance(time.Millisecond)
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("64 entries fit, the 65th overflows", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("yes"))
		fd.instructionFor(call.ID)
		for seq := int64(1); seq <= 64; seq++ {
			fd.chunk(call.ID, seq, protocol.ChunkStdout, "y")
			fd.expectChunkAck(call.ID, -1)
		}
		if isSettled(call) {
			t.Fatal("64 buffered entries overflowed")
		}
		fd.chunk(call.ID, 65, protocol.ChunkStdout, "y")
		none[*protocol.ChunkAck](t, fd.barrier(), "chunkAck for the overflowing chunk", nil)
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "reorder buffer") {
			t.Fatalf("message %q", f.Message)
		}
		fd.expectCancel(call.ID)
	})
	t.Run("2 MiB decoded fits, one byte more overflows", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("cat big"))
		fd.instructionFor(call.ID)
		part := strings.Repeat("z", 512<<10)
		for seq := int64(1); seq <= 4; seq++ {
			fd.chunk(call.ID, seq, protocol.ChunkStdout, part)
			fd.expectChunkAck(call.ID, -1)
		}
		fd.chunk(call.ID, 5, protocol.ChunkStdout, "")
		fd.expectChunkAck(call.ID, -1) // an empty chunk adds no bytes
		if isSettled(call) {
			t.Fatal("exactly 2 MiB buffered overflowed")
		}
		fd.chunk(call.ID, 6, protocol.ChunkStdout, "!")
		fd.barrier()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("the bounds are configurable", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.ReorderEntries, c.GapTimeout = 2, time.Second })
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("x"))
		fd.instructionFor(call.ID)
		for seq := int64(1); seq <= 3; seq++ {
			fd.chunk(call.ID, seq, protocol.ChunkStdout, "y")
		}
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
}

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

// R13: the three bye reasons.
func TestR13Bye(t *testing.T) {
	t.Run("revoked", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.MaxInflight = 1 })
		fd := l.enroll()
		fd.establish()
		running := l.dispatch(fd, execInstr("a"))
		queued := l.dispatch(fd, execInstr("b"))
		fd.instructionFor(running.ID)
		if r := l.do("POST", "/v1/devices/"+fd.id+"/revoke", l.ownerKey, ""); r.status != 200 {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		bye := expect[*protocol.Bye](fd, nil)
		if bye.Reason != protocol.ByeRevoked || bye.Gen != fd.gen {
			t.Fatalf("bye %+v", bye)
		}
		fd.expectClosed()
		wantFailure(t, settled(t, running), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		wantFailure(t, settled(t, queued), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectRevoked)
		if c := l.dispatch(fd, execInstr("c")); !isSettled(c) {
			t.Fatal("a dispatch to a revoked device was queued")
		}
	})
	t.Run("revoked while in the reconnect grace", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("a"))
		fd.instructionFor(call.ID)
		fd.drop()
		if r := l.do("POST", "/v1/devices/"+fd.id+"/revoke", l.ownerKey, ""); r.status != 200 {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "revoked") {
			t.Fatalf("message %q", f.Message)
		}
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectRevoked)
	})
	t.Run("draining", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("a"))
		fd.instructionFor(call.ID)
		done := make(chan error, 1)
		go func() { done <- l.srv.Shutdown(context.Background()) }()
		bye := expect[*protocol.Bye](fd, nil)
		if bye.Reason != protocol.ByeDraining {
			t.Fatalf("bye %+v", bye)
		}
		fd.expectClosed()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitBound):
			t.Fatal("Shutdown did not return")
		}
		if _, resp, err := l.dialRaw(); err == nil || resp == nil || resp.StatusCode != 503 {
			t.Fatalf("dial while draining: %v, want 503", err)
		}
		c := l.dispatch(fd, execInstr("b"))
		wantFailure(t, settled(t, c), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	})
	t.Run("superseded by a stale takeover", func(t *testing.T) {
		l := newWSLane(t)
		h := l.srv.cfg.HeartbeatInterval
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("a"))
		fd.instructionFor(call.ID)
		// The old socket is judged stale after three missed heartbeats.
		// Its own liveness check has not run yet (a sweep that is late):
		// stop it, so the takeover, not R14, is what ends it.
		d := l.device(fd.id)
		d.mu.Lock()
		d.conn.liveness.Stop()
		d.mu.Unlock()
		l.clk.Advance(3 * h)
		other := *fd
		other.restart() // another executor instance
		ack := other.connect()
		bye := expect[*protocol.Bye](fd, nil)
		if bye.Reason != protocol.ByeSuperseded || bye.Gen == ack.Gen {
			t.Fatalf("bye %+v to the old socket", bye)
		}
		fd.expectClosed()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if len(ack.PendingInstructions) != 0 {
			t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
		}
		other.send(&protocol.GenerationAck{Gen: other.gen})
		next := l.dispatch(&other, execInstr("b"))
		other.answerExec(other.instructionFor(next.ID).InstructionID, 0)
		settled(t, next)
	})
}

// R14: no frame at all for 3 × H closes the connection; any frame refreshes
// liveness; the work in flight enters the reconnect grace.
func TestR14Liveness(t *testing.T) {
	l := newWSLane(t)
	h := l.srv.cfg.HeartbeatInterval
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
	fd.instructionFor(call.ID)
	c := l.current(fd.id)
	// Heartbeats keep a quiet connection alive.
	for i := range 5 {
		l.clk.Advance(h)
		fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: int64(i), Inflight: []string{call.ID}})
		fd.barrier()
	}
	// Then silence.
	l.clk.Advance(3*h - time.Millisecond)
	if c.ctx.Err() != nil {
		t.Fatal("closed before 3 × H of silence")
	}
	l.clk.Advance(time.Millisecond)
	if c.ctx.Err() == nil {
		t.Fatal("still open after 3 × H of silence")
	}
	fd.expectClosed()
	if got := l.auditReasons("device.liveness_lost", fd.id); len(got) != 1 {
		t.Fatalf("%d liveness_lost rows", len(got))
	}
	eventually(t, "the lane cleaned up", func() bool { return l.current(fd.id) == nil })
	l.clk.Advance(l.srv.cfg.ReconnectGrace)
	wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
}

// R14 with a configured H: helloAck carries it and the close follows it.
func TestR14HeartbeatIntervalIsConfigurable(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.HeartbeatInterval = 100 * time.Millisecond })
	fd := l.enroll()
	if ack := fd.establish(); ack.HeartbeatIntervalMs != 100 {
		t.Fatalf("heartbeatIntervalMs %d", ack.HeartbeatIntervalMs)
	}
	l.clk.Advance(300 * time.Millisecond)
	fd.expectClosed()
}

// R15: after goodbye nothing new is dispatched, results are still
// collected, and the socket closes after graceMs.
func TestR15Goodbye(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 2 })
	fd := l.enroll()
	fd.establish()
	a := l.dispatch(fd, execInstr("a"))
	b := l.dispatch(fd, execInstr("b"))
	queued := l.dispatch(fd, execInstr("queued"))
	fd.instructionFor(a.ID)
	fd.instructionFor(b.ID)
	grace := int64(5000)
	fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeShutdown, GraceMs: &grace})
	fd.barrier()
	// Nothing new starts; what only waited for a slot never reached the device.
	wantFailure(t, settled(t, queued), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	late := l.dispatch(fd, execInstr("late"))
	wantFailure(t, settled(t, late), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	// Results keep being collected, and a freed slot is not refilled.
	fd.answerExec(a.ID, 0)
	if s := settled(t, a); !s.Outcome.OK() {
		t.Fatalf("a settled %+v", s)
	}
	none[*protocol.Instruction](t, fd.barrier(), "an instruction after goodbye", nil)
	// The in-flight work can still be cancelled.
	b.Cancel()
	fd.expectCancel(b.ID)
	// Heartbeats still count; presence still shows the connection.
	fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: 1, Inflight: []string{b.ID}})
	if p := l.srv.Presence(fd.id); !p.Online {
		t.Fatal("offline during the goodbye grace")
	}
	c := l.current(fd.id)
	l.clk.Advance(time.Duration(grace)*time.Millisecond - time.Millisecond)
	if c.ctx.Err() != nil {
		t.Fatal("closed before graceMs")
	}
	l.clk.Advance(time.Millisecond)
	fd.expectClosed()
	// b is still in flight: the ordinary disconnect path (R4) — here the
	// device comes back with the same epoch and answers it.
	eventually(t, "the lane cleaned up", func() bool { return l.current(fd.id) == nil })
	if isSettled(b) {
		t.Fatalf("b settled %+v at the goodbye close", settled(t, b))
	}
	ack := fd.establish()
	if !slices.Equal(ack.PendingInstructions, []string{b.ID}) {
		t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
	}
	fd.expectCancel(b.ID) // still wanted: replayed
	fd.result(b.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
	fd.expectResultAck(b.ID)
	settled(t, b)
}

// R15 without graceMs: the reconnect grace is the default.
func TestR15GoodbyeGraceDefaultsToTheReconnectGrace(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.ReconnectGrace = 7 * time.Second })
	fd := l.enroll()
	fd.establish()
	fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeSleep})
	fd.barrier()
	c := l.current(fd.id)
	l.clk.Advance(7*time.Second - time.Millisecond)
	if c.ctx.Err() != nil {
		t.Fatal("closed before the reconnect grace")
	}
	l.clk.Advance(time.Millisecond)
	fd.expectClosed()
	rows := l.auditReasons("device.goodbye", fd.id)
	if !slices.Equal(rows, []string{"sleep"}) {
		t.Fatalf("goodbye audit %v", rows)
	}
}

// Presence (§8): GET /v1/devices shows online, gen, connected since and the
// in-flight count, from this replica.
func TestPresenceInDeviceList(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	list := func() deviceBody {
		t.Helper()
		var body struct {
			Devices []deviceBody `json:"devices"`
		}
		r := l.do("GET", "/v1/devices", l.ownerKey, "")
		if err := json.Unmarshal(r.body, &body); err != nil || len(body.Devices) != 1 {
			t.Fatalf("devices: %d %s", r.status, r.body)
		}
		return body.Devices[0]
	}
	if d := list(); d.Online || d.Gen != "" || d.Inflight != 0 {
		t.Fatalf("before connecting: %+v", d)
	}
	l.clk.Advance(time.Minute)
	fd.establish()
	a := l.dispatch(fd, execInstr("a"))
	b := l.dispatch(fd, execInstr("b"))
	fd.instructionFor(a.ID)
	fd.instructionFor(b.ID)
	d := list()
	if !d.Online || d.Gen != fd.gen.String() || d.Inflight != 2 || d.ConnectedSince != wireTime(laneStart.Add(time.Minute)) {
		t.Fatalf("connected: %+v (gen %s)", d, fd.gen)
	}
	fd.answerExec(a.ID, 0)
	settled(t, a)
	if d := list(); d.Inflight != 1 {
		t.Fatalf("inflight %d after one settled", d.Inflight)
	}
	fd.drop()
	if d := list(); d.Online {
		t.Fatalf("after the drop: %+v", d)
	}
}

// replica starts another lane server on the same registry, as a replacement
// replica (or the restarted single one) would.
func (l *wsLane) replica() *wsLane {
	l.t.Helper()
	clk := clock.NewFake(laneStart)
	srv, err := New(Config{Store: l.store, Clock: clk, Logger: quietLogger(), Now: l.clock.Now})
	if err != nil {
		l.t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	l.t.Cleanup(func() { srv.Shutdown(context.Background()) })
	l.t.Cleanup(hs.Close)
	tl := &testLane{t: l.t, url: hs.URL, store: l.store, clock: l.clock, srv: srv}
	return &wsLane{testLane: tl, clk: clk, owner: l.owner, ownerKey: l.ownerKey}
}

// R13 draining: "reconnect with backoff; a replacement replica will take
// you". Shutdown releases the leases, so the replacement can.
func TestR13DrainingReleasesTheLease(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	if err := l.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bye := expect[*protocol.Bye](fd, nil); bye.Reason != protocol.ByeDraining {
		t.Fatalf("bye %+v", bye)
	}
	fd.expectClosed()
	fd.l = l.replica()
	fd.establish()
}

// R13 superseded: the superseded socket going away does not release the
// lease its successor holds.
func TestR13SupersededSocketLeavesTheNewLease(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	d := l.device(fd.id)
	d.mu.Lock()
	d.conn.liveness.Stop()
	d.mu.Unlock()
	l.clk.Advance(3 * l.srv.cfg.HeartbeatInterval)
	other := *fd
	other.connect()
	expect[*protocol.Bye](fd, nil)
	fd.expectClosed()
	eventually(t, "the superseded socket was cleaned up", func() bool {
		return len(l.auditReasons("device.disconnected", fd.id)) == 1
	})
	// The successor still holds the lease: another replica is refused.
	third := other
	third.l = l.replica()
	third.restart()
	third.dial()
	third.send(third.helloFrame())
	third.expectReject(protocol.RejectAlreadyConnected)
}

// The stored lease is renewed by heartbeats; a lease lost to someone else
// closes the connection.
func TestLeaseLostClosesTheConnection(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	c := l.current(fd.id)
	if _, err := l.store.AcquireLease(t.Context(), store.LeaseRequest{DeviceID: fd.id, Holder: "con_elsewhere", Epoch: ids.ULID(), TTL: time.Minute, Takeover: c.holder}); err != nil {
		t.Fatal(err)
	}
	l.clk.Advance(l.srv.cfg.LeaseTTL / 3)
	fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: 1})
	fd.expectClosed()
	if got := l.auditReasons("device.lease_lost", fd.id); len(got) != 1 {
		t.Fatalf("%d lease_lost rows", len(got))
	}
}
