package lane_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// R5: a lost resultAck: the re-sent result is processed if I is open, acked
// from the memo if I settled for any reason, and refused
// unknown_instruction without an ack once I aged out of the 512-entry memo.
func TestR5LostResultAck(t *testing.T) {
	r, fe := connected(t)
	// (b) settled by its own result: the resend is acked and changes nothing.
	i := fe.start(execIn("true"))
	fe.answerExec(i.ID, 0)
	fe.result(i.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(i.ID)
	// (b) settled for a reason the device did not cause (the ceiling).
	j := fe.start(lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Second})
	r.clk.Advance(time.Second + r.Config().ExecutionGrace)
	wantFailure(t, settled(t, j), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	fe.exit(j.ID, 0, 0)
	fe.result(j.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(j.ID)
	if settled(t, j).Outcome.OK() {
		t.Fatal("a result after the ceiling overturned the settlement")
	}
	// (c) aged out: j is the most recent settled; 511 more keep it, the 512th evicts it.
	if r.Config().SettledMemo != 512 {
		t.Fatalf("SettledMemo %d, want the spec's 512", r.Config().SettledMemo)
	}
	settleOne := func() {
		c := fe.start(execIn("true"))
		fe.result(c.ID, 0, protocol.Failure{ErrorCode: protocol.ErrSpawnError, Message: "no"})
		fe.expectResultAck(c.ID)
		settled(t, c)
	}
	for range 511 {
		settleOne()
	}
	fe.result(j.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(j.ID) // still the 512th most recent
	settleOne()
	fe.result(j.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.chunk(j.ID, 1, protocol.ChunkStdout, "late")
	fe.plant() // the barrier planted first has aged out too
	frames := fe.barrier()
	none[*protocol.ResultAck](t, frames, "resultAck for an aged-out instruction", func(a *protocol.ResultAck) bool { return a.InstructionID == j.ID })
	none[*protocol.ChunkAck](t, frames, "chunkAck for an aged-out instruction", nil)
	r.wantRefused("unknown_instruction", "unknown_instruction")
}

// R6: a result with deviceSeq ≤ the accepted one is re-acked and absorbed
// without touching the outcome.
func TestR6DeviceSeqIdempotence(t *testing.T) {
	_, fe := connected(t)
	call := fe.start(execIn("true"))
	fe.exit(call.ID, 0, 7)
	fe.expectChunkAck(call.ID, 0)
	fe.result(call.ID, 4, protocol.ExecOutcome{ExitCode: 7})
	fe.expectResultAck(call.ID)
	for _, seq := range []int64{4, 3, 0} {
		fe.result(call.ID, seq, protocol.Failure{ErrorCode: protocol.ErrUnknown, Message: "retransmission"})
		fe.expectResultAck(call.ID)
	}
	// A higher deviceSeq after the settlement is no new terminal either.
	fe.result(call.ID, 5, protocol.Failure{ErrorCode: protocol.ErrUnknown, Message: "second opinion"})
	fe.expectResultAck(call.ID)
	s := settled(t, call)
	if e, ok := s.Outcome.(protocol.ExecOutcome); !ok || e.ExitCode != 7 {
		t.Fatalf("settlement %+v, want the first accepted result (exitCode 7)", s)
	}
}

// R7: chunks at or below the watermark are absorbed and re-acked; a
// buffered seq is first-write-wins.
func TestR7ChunkResendIsIdempotent(t *testing.T) {
	_, fe := connected(t)
	call := fe.start(execIn("cat"))
	for seq, data := range []string{"a", "b", "c"} {
		fe.chunk(call.ID, int64(seq), protocol.ChunkStdout, data)
		fe.expectChunkAck(call.ID, int64(seq))
	}
	fe.chunk(call.ID, 1, protocol.ChunkStdout, "b")
	fe.expectChunkAck(call.ID, 2)
	fe.chunk(call.ID, 0, protocol.ChunkStdout, "DIFFERENT")
	fe.expectChunkAck(call.ID, 2)
	fe.chunk(call.ID, 4, protocol.ChunkStdout, "first")
	fe.expectChunkAck(call.ID, 2)
	fe.chunk(call.ID, 4, protocol.ChunkStdout, "second")
	fe.expectChunkAck(call.ID, 2)
	fe.chunk(call.ID, 3, protocol.ChunkStdout, "d")
	fe.expectChunkAck(call.ID, 4)
	fe.exit(call.ID, 5, 0)
	fe.expectChunkAck(call.ID, 5)
	fe.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fe.expectResultAck(call.ID)
	chunks, s := callEvents(t, call)
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
		r, fe := connected(t)
		gap := r.Config().GapTimeout
		call := fe.start(lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
		fe.chunk(call.ID, 1, protocol.ChunkStdout, "b") // 0 is missing
		fe.expectChunkAck(call.ID, -1)
		r.clk.Advance(gap - time.Millisecond)
		fe.chunk(call.ID, 2, protocol.ChunkStdout, "c") // no progress: the timer keeps running
		fe.expectChunkAck(call.ID, -1)
		if isSettled(call) {
			t.Fatal("settled before the gap timeout")
		}
		r.clk.Advance(time.Millisecond)
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "streamSeq 0") {
			t.Fatalf("message %q", f.Message)
		}
		fe.expectCancel(call.ID) // the lane tells the device to stop work it wrote off
		// The gap filled now is too late: no ack.
		fe.chunk(call.ID, 0, protocol.ChunkStdout, "a")
		none[*protocol.ChunkAck](t, fe.barrier(), "chunkAck after the gap failure", nil)
	})
	t.Run("progress restarts the gap timer", func(t *testing.T) {
		r, fe := connected(t)
		gap := r.Config().GapTimeout
		call := fe.start(lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
		fe.chunk(call.ID, 1, protocol.ChunkStdout, "b")
		fe.expectChunkAck(call.ID, -1)
		r.clk.Advance(gap - time.Millisecond)
		fe.chunk(call.ID, 0, protocol.ChunkStdout, "a")
		fe.expectChunkAck(call.ID, 1)
		fe.chunk(call.ID, 3, protocol.ChunkStdout, "d") // a new gap, at 2
		fe.expectChunkAck(call.ID, 1)
		r.clk.Advance(gap - time.Millisecond)
		if isSettled(call) {
			t.Fatal("the first gap's timer failed a stream whose gap was filled")
		}
		r.clk.Advance(time.Millisecond)
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("64 entries fit, the 65th overflows", func(t *testing.T) {
		_, fe := connected(t)
		call := fe.start(execIn("yes"))
		for seq := int64(1); seq <= 64; seq++ {
			fe.chunk(call.ID, seq, protocol.ChunkStdout, "y")
			fe.expectChunkAck(call.ID, -1)
		}
		if isSettled(call) {
			t.Fatal("64 buffered entries overflowed")
		}
		fe.chunk(call.ID, 65, protocol.ChunkStdout, "y")
		none[*protocol.ChunkAck](t, fe.barrier(), "chunkAck for the overflowing chunk", nil)
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "reorder buffer") {
			t.Fatalf("message %q", f.Message)
		}
		fe.expectCancel(call.ID)
	})
	t.Run("2 MiB decoded fits, one byte more overflows", func(t *testing.T) {
		_, fe := connected(t)
		call := fe.start(execIn("cat big"))
		part := strings.Repeat("z", 512<<10)
		for seq := int64(1); seq <= 4; seq++ {
			fe.chunk(call.ID, seq, protocol.ChunkStdout, part)
			fe.expectChunkAck(call.ID, -1)
		}
		fe.chunk(call.ID, 5, protocol.ChunkStdout, "")
		fe.expectChunkAck(call.ID, -1) // an empty chunk adds no bytes
		if isSettled(call) {
			t.Fatal("exactly 2 MiB buffered overflowed")
		}
		fe.chunk(call.ID, 6, protocol.ChunkStdout, "!")
		fe.barrier()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
	t.Run("the bounds are configurable", func(t *testing.T) {
		_, fe := connected(t, func(c *lane.Config) { c.ReorderEntries, c.GapTimeout = 2, time.Second })
		call := fe.start(execIn("x"))
		for seq := int64(1); seq <= 3; seq++ {
			fe.chunk(call.ID, seq, protocol.ChunkStdout, "y")
		}
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
	})
}
