package lane

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

// §2.4 stage 2: unknown_instruction — neither in flight nor in the memo.
func TestGateUnknownInstruction(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	ghost := ids.New(ids.Instruction)
	fd.result(ghost, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.chunk(ghost, 0, protocol.ChunkStdout, "boo")
	frames := fd.barrier()
	none[*protocol.ResultAck](t, frames, "resultAck for an unknown instruction", func(a *protocol.ResultAck) bool { return a.InstructionID == ghost })
	none[*protocol.ChunkAck](t, frames, "chunkAck for an unknown instruction", nil)
	l.wantRejected(fd.id, "unknown_instruction", "unknown_instruction")
}

// §2.4 stage 2: instruction_not_committed — tracked but not dispatched.
func TestGateInstructionNotCommitted(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 1 })
	fd := l.enroll()
	fd.establish()
	running := l.dispatch(fd, execInstr("a"))
	queued := l.dispatch(fd, execInstr("b"))
	fd.instructionFor(running.ID)
	fd.result(queued.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.chunk(queued.ID, 0, protocol.ChunkStdout, "early")
	frames := fd.barrier()
	none[*protocol.ResultAck](t, frames, "resultAck for a queued instruction", func(a *protocol.ResultAck) bool { return a.InstructionID == queued.ID })
	none[*protocol.ChunkAck](t, frames, "chunkAck for a queued instruction", nil)
	l.wantRejected(fd.id, "instruction_not_committed", "instruction_not_committed")
	if st := l.callState(queued); st != protocol.StateQueued {
		t.Fatalf("the queued call is %s", st)
	}
	// It is still sent, once, when its slot comes, and answered normally.
	fd.answerExec(running.ID, 0)
	fd.instructionFor(queued.ID)
	fd.answerExec(queued.ID, 0)
	if s := settled(t, queued); !s.Outcome.OK() {
		t.Fatalf("settlement %+v", s)
	}
}

// §2.4 stage 2: device_mismatch — the instruction belongs to another device,
// in flight or remembered.
func TestGateDeviceMismatch(t *testing.T) {
	l := newWSLane(t)
	a, b := l.enroll(), l.enroll()
	a.establish()
	b.establish()
	call := l.dispatch(b, execInstr("b's"))
	b.instructionFor(call.ID)
	a.chunk(call.ID, 0, protocol.ChunkStdout, "hijack")
	a.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 0})
	frames := a.barrier()
	none[*protocol.ChunkAck](t, frames, "chunkAck to another device", nil)
	none[*protocol.ResultAck](t, frames, "resultAck to another device", func(r *protocol.ResultAck) bool { return r.InstructionID == call.ID })
	if isSettled(call) {
		t.Fatal("another device settled the call")
	}
	b.answerExec(call.ID, 0)
	settled(t, call)
	a.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 0}) // now in the memo, still b's
	none[*protocol.ResultAck](t, a.barrier(), "a memo resultAck to another device", func(r *protocol.ResultAck) bool { return r.InstructionID == call.ID })
	l.wantRejected(a.id, "device_mismatch", "device_mismatch", "device_mismatch")
	l.wantRejected(b.id)
}

// runKind dispatches an instruction and waits until the device has it.
func runKind(t *testing.T, l *wsLane, fd *fakeDevice, in Instruction) *Call {
	t.Helper()
	call, err := l.srv.Dispatch(t.Context(), fd.id, in)
	if err != nil {
		t.Fatal(err)
	}
	fd.instructionFor(call.ID)
	return call
}

func wireJSON(t testing.TB, o protocol.Outcome) string {
	t.Helper()
	b, err := o.(interface{ MarshalJSON() ([]byte, error) }).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// §4: the exec stream checks and the chunk kinds that fit each instruction.
func TestStreamChecks(t *testing.T) {
	read := Instruction{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: "/etc/hosts"}, Timeout: time.Minute}
	mkdir := Instruction{Kind: protocol.KindCreateDir, Args: protocol.DirArgs{Path: "/tmp/x"}, Timeout: time.Minute}
	stream := Instruction{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "tail"}, Timeout: time.Minute}
	type step func(fd *fakeDevice, id string)
	chunk := func(seq int64, kind protocol.ChunkKind, data string) step {
		return func(fd *fakeDevice, id string) { fd.chunk(id, seq, kind, data) }
	}
	exit := func(seq int64, code int) step {
		return func(fd *fakeDevice, id string) { fd.exit(id, seq, code) }
	}
	result := func(o protocol.Outcome) step {
		return func(fd *fakeDevice, id string) { fd.result(id, 0, o) }
	}
	ok0 := protocol.ExecOutcome{ExitCode: 0}
	cases := []struct {
		name     string
		in       Instruction
		steps    []step
		unknown  bool   // settles outcome_unknown
		mentions string // in the failure message
	}{
		{"exec with its exit chunk", execInstr("x"), []step{chunk(0, protocol.ChunkStdout, "o"), chunk(1, protocol.ChunkStderr, "e"), exit(2, 0), result(ok0)}, false, ""},
		{"exec without output still needs exit at 0", execInstr("x"), []step{exit(0, 0), result(ok0)}, false, ""},
		{"exec: exit missing", execInstr("x"), []step{chunk(0, protocol.ChunkStdout, "o"), result(ok0)}, true, "exit chunk"},
		{"exec: two exits", execInstr("x"), []step{exit(0, 0), exit(1, 0)}, true, "after the exit chunk"},
		{"exec: exit not last", execInstr("x"), []step{exit(0, 0), chunk(1, protocol.ChunkStdout, "more")}, true, "after the exit chunk"},
		{"exec: exit not last, delivered from the reorder buffer", execInstr("x"), []step{chunk(1, protocol.ChunkStdout, "more"), exit(0, 0)}, true, "after the exit chunk"},
		{"exec: exit code mismatch", execInstr("x"), []step{exit(0, 3), result(protocol.ExecOutcome{ExitCode: 0})}, true, "exit chunk says 3"},
		{"exec: a data chunk", execInstr("x"), []step{chunk(0, protocol.ChunkData, "d")}, true, "not data"},
		{"exec: result with a gap left", execInstr("x"), []step{exit(1, 0), result(ok0)}, true, "streamSeq 0"},
		{"exec: a failure needs no exit", execInstr("x"), []step{chunk(0, protocol.ChunkStderr, "sh: x: not found"), result(protocol.Failure{ErrorCode: protocol.ErrShellUnavailable, Message: "no shell"})}, false, ""},
		{"exec: a cancel receipt needs no exit", execInstr("x"), []step{result(protocol.CancelledOutcome{State: protocol.CancelKilled})}, false, ""},
		{"execStream: exit missing", stream, []step{result(ok0)}, true, "exit chunk"},
		{"execStream with its exit chunk", stream, []step{chunk(0, protocol.ChunkStdout, "line"), exit(1, 0), result(ok0)}, false, ""},
		{"read: data chunks", read, []step{chunk(0, protocol.ChunkData, "127.0.0.1"), chunk(1, protocol.ChunkData, " localhost"), result(protocol.ReadOutcome{})}, false, ""},
		{"read: a stdout chunk", read, []step{chunk(0, protocol.ChunkStdout, "x")}, true, "data chunks only"},
		{"read: an exit chunk", read, []step{chunk(0, protocol.ChunkData, "x"), exit(1, 0)}, true, "data chunks only"},
		{"createDir: any chunk", mkdir, []step{chunk(0, protocol.ChunkData, "x")}, true, "no output stream"},
	}
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fd.t = t
			call := runKind(t, l, fd, c.in)
			for _, s := range c.steps {
				s(fd, call.ID)
			}
			s := settled(t, call)
			if c.unknown {
				f := wantFailure(t, s, protocol.StateTerminal, protocol.ErrOutcomeUnknown)
				if !strings.Contains(f.Message, c.mentions) {
					t.Fatalf("message %q does not mention %q", f.Message, c.mentions)
				}
				return
			}
			if s.State != protocol.StateTerminal {
				t.Fatalf("settlement %+v", s)
			}
			if f, ok := s.Outcome.(protocol.Failure); ok && f.ErrorCode == protocol.ErrOutcomeUnknown {
				t.Fatalf("a well-formed stream settled %+v", s)
			}
		})
	}
	fd.t = t
}

// §3.1: the outcome kind must fit the instruction kind; the stat arm must
// carry the field asked for; failures and cancel receipts always fit.
func TestOutcomeMustFitTheInstruction(t *testing.T) {
	yes := true
	path := func(k protocol.InstructionKind) Instruction {
		return Instruction{Kind: k, Args: protocol.PathArgs{Path: "/w/f"}, Timeout: time.Minute}
	}
	dir := func(k protocol.InstructionKind) Instruction {
		return Instruction{Kind: k, Args: protocol.DirArgs{Path: "/w/d"}, Timeout: time.Minute}
	}
	write := Instruction{Kind: protocol.KindAppendFile, Args: protocol.WriteArgs{Path: "/w/f"}, Content: []byte("x"), Timeout: time.Minute}
	stream := Instruction{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Minute}
	tmp := Instruction{Kind: protocol.KindCreateTempDir, Args: protocol.TempDirArgs{}, Timeout: time.Minute}
	cases := []struct {
		name string
		in   Instruction
		out  protocol.Outcome
		fits bool
	}{
		{"execStream answered void", stream, protocol.VoidOutcome{}, false},
		{"execStream answered read", stream, protocol.ReadOutcome{}, false},
		{"exists answered with existsValue", path(protocol.KindExists), protocol.StatOutcome{ExistsValue: &yes}, true},
		{"exists answered without existsValue", path(protocol.KindExists), protocol.StatOutcome{}, false},
		{"fileInfo without info", path(protocol.KindFileInfo), protocol.StatOutcome{CanonicalPath: "/w/f"}, false},
		{"listDir with no entries", path(protocol.KindListDir), protocol.StatOutcome{Entries: []protocol.FileInfo{}}, true},
		{"listDir without entries", path(protocol.KindListDir), protocol.StatOutcome{}, false},
		{"canonicalPath without it", path(protocol.KindCanonicalPath), protocol.StatOutcome{ExistsValue: &yes}, false},
		{"readLink not a symlink", path(protocol.KindReadLink), protocol.StatOutcome{LinkTarget: &protocol.LinkTarget{}}, true},
		{"readLink without linkTarget", path(protocol.KindReadLink), protocol.StatOutcome{}, false},
		{"appendFile answered void", write, protocol.VoidOutcome{}, true},
		{"appendFile answered write", write, protocol.WriteOutcome{CanonicalPath: "/w/f"}, false},
		{"createTempDir answered write", tmp, protocol.WriteOutcome{CanonicalPath: "/tmp/x1"}, true},
		{"createDir answered stat", dir(protocol.KindCreateDir), protocol.StatOutcome{ExistsValue: &yes}, false},
		{"remove answered with a failure", dir(protocol.KindRemove), protocol.Failure{ErrorCode: protocol.ErrNotFound, Message: "gone"}, true},
		{"remove answered cancelled", dir(protocol.KindRemove), protocol.CancelledOutcome{State: protocol.CancelNotStarted}, true},
	}
	l := newWSLane(t)
	fd := l.enroll(append(defaultSupports, protocol.KindReadLink)...)
	fd.establish()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fd.t = t
			call := runKind(t, l, fd, c.in)
			fd.result(call.ID, 0, c.out)
			fd.expectResultAck(call.ID) // refused or not, the result settled the call
			s := settled(t, call)
			if !c.fits {
				wantFailure(t, s, protocol.StateTerminal, protocol.ErrOutcomeUnknown)
				return
			}
			if wireJSON(t, s.Outcome) != wireJSON(t, c.out) {
				t.Fatalf("settlement %#v, want %#v", s.Outcome, c.out)
			}
		})
	}
	fd.t = t
	// A write arm without canonicalPath cannot even be encoded by the
	// protocol package; a device that sends it raw is refused the same way.
	w := Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"}, Content: []byte("x"), Timeout: time.Minute}
	call := runKind(t, l, fd, w)
	fd.sendText(fmt.Sprintf(`{"t":"result","gen":"%s","instructionId":"%s","deviceSeq":0,"outcome":{"ok":true,"kind":"write","canonicalPath":""}}`, fd.gen, call.ID))
	frames := fd.barrier()
	if isSettled(call) {
		// A bad_shape frame costs the frame; the call is untouched.
		t.Fatalf("a malformed result settled the call: %+v", settled(t, call))
	}
	none[*protocol.ResultAck](t, frames, "resultAck for a malformed result", func(a *protocol.ResultAck) bool { return a.InstructionID == call.ID })
}

// §4 consumer side: a device that runs ahead of its acknowledgements while
// the caller does not read overflows the pending-delivery bound, and the
// remote command is cancelled.
func TestDeliveryOverflowCancelsTheCommand(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.DeliveryEntries = 2 })
	fd := l.enroll()
	fd.establish()
	call := runKind(t, l, fd, execInstr("yes"))
	for seq := range int64(3) {
		fd.chunk(call.ID, seq, protocol.ChunkStdout, "y\n")
	}
	fd.expectChunkAck(call.ID, 0) // then the window (half the bound) is full
	fd.expectCancel(call.ID)
	if call.Err() != ErrDeliveryOverflow {
		t.Fatalf("Err() = %v", call.Err())
	}
	fd.result(call.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
	fd.expectResultAck(call.ID)
	chunks, s := events(t, call)
	if len(chunks) != 2 {
		t.Fatalf("%d chunks delivered, want the 2 the bound admitted", len(chunks))
	}
	// The caller did not get all the output: never the device's cancel
	// receipt as it stands, but the lane's failure naming the bound.
	f := wantFailure(t, s, protocol.StateTerminal, protocol.ErrAborted)
	for _, want := range []string{"the lane cancelled the command", "pending-delivery bound", "streamSeq 2", "killed"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q does not say %q", f.Message, want)
		}
	}
	if !s.LaneCancelled {
		t.Error("Settlement.LaneCancelled is false for the lane's own cancel")
	}
	if n := l.srv.Metrics().DeliveryOverflows; n != 1 {
		t.Errorf("DeliveryOverflows = %d, want 1", n)
	}
}
