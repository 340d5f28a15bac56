package lane

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

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
