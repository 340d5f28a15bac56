package lane

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/sema-agent/sema/internal/syncbuf"
	"github.com/sema-agent/sema/protocol"
)

// The write loop, on real sockets: §2's order, the write timeout, the
// queue's bound, and no goroutine per frame.

// §2: instruction frames go out in issuedSeq order, exactly once; a
// write's payload follows its instruction frame, begin, ascending chunks,
// commit; a cancel never overtakes its instruction; acknowledgements go out
// in the order of the frames they answer.
func TestWriterKeepsTheFrameOrder(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 8; c.PayloadPartBytes = 4 })
	fd := l.enroll()
	fd.establish()
	a := l.dispatch(fd, execInstr("a"))
	b := l.dispatch(fd, Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/b"},
		Content: []byte("0123456789abcdefghij"), Timeout: time.Minute})
	c := l.dispatch(fd, execInstr("c"))
	a.Cancel()
	c.Cancel()
	order := []string{a.ID, b.ID, c.ID}

	var frames []protocol.ServerFrame
	cancels, commit := 0, false
	for cancels < 2 || !commit {
		f := fd.next()
		frames = append(frames, f)
		switch f := f.(type) {
		case *protocol.Cancel:
			cancels++
		case *protocol.Payload:
			commit = commit || f.Part == protocol.PartCommit
		}
	}
	seen := map[string]int{} // instruction id -> its index in frames
	var issued []string
	next := int64(1)
	offset := int64(0)
	payload := protocol.PartBegin
	for i, f := range frames {
		switch f := f.(type) {
		case *protocol.Instruction:
			if _, again := seen[f.InstructionID]; again {
				t.Fatalf("instruction %s sent twice (R1)", f.InstructionID)
			}
			if f.IssuedSeq != next {
				t.Fatalf("issuedSeq %d, want %d", f.IssuedSeq, next)
			}
			next++
			seen[f.InstructionID] = i
			issued = append(issued, f.InstructionID)
		case *protocol.Cancel:
			if _, ok := seen[f.InstructionID]; !ok {
				t.Fatalf("the cancel of %s overtook its instruction", f.InstructionID)
			}
		case *protocol.Payload:
			if _, ok := seen[f.InstructionID]; !ok || f.InstructionID != b.ID {
				t.Fatalf("a payload of %s before its instruction", f.InstructionID)
			}
			if f.Part != payload || (f.Part == protocol.PartChunk && f.Offset != offset) {
				t.Fatalf("payload part %s at %d, want %s at %d", f.Part, f.Offset, payload, offset)
			}
			switch f.Part {
			case protocol.PartBegin:
				payload = protocol.PartChunk
			case protocol.PartChunk:
				if offset += int64(len(f.Data)); offset == 20 {
					payload = protocol.PartCommit
				}
			case protocol.PartCommit:
				payload = ""
			}
		default:
			t.Fatalf("unexpected %s", describe(f))
		}
	}
	if !slices.Equal(issued, order) {
		t.Fatalf("instructions in the order %q, want %q", issued, order)
	}

	// Acknowledgements in the order of the frames they answer.
	fd.chunk(c.ID, 0, protocol.ChunkStdout, "x")
	fd.chunk(c.ID, 1, protocol.ChunkStdout, "y")
	fd.result(b.ID, 0, protocol.WriteOutcome{CanonicalPath: "/w/b"})
	fd.result(a.ID, 0, protocol.CancelledOutcome{State: protocol.CancelNotStarted})
	var acks []string
	for len(acks) < 4 {
		switch f := fd.next().(type) {
		case *protocol.ChunkAck:
			acks = append(acks, fmt.Sprintf("chunkAck %s %d", f.InstructionID, f.UpToStreamSeq))
		case *protocol.ResultAck:
			acks = append(acks, "resultAck "+f.InstructionID)
		default:
			t.Fatalf("unexpected %s", describe(f))
		}
	}
	want := []string{"chunkAck " + c.ID + " 0", "chunkAck " + c.ID + " 1", "resultAck " + b.ID, "resultAck " + a.ID}
	if !slices.Equal(acks, want) {
		t.Fatalf("acknowledgements %q, want %q", acks, want)
	}
}

// A device that does not take a frame within WriteTimeout is closed; its
// work takes the disconnect path (R4) and is never sent again (R1): a
// reconnect lists it as pending and re-sends nothing.
func TestStuckDeviceIsClosedAfterTheWriteTimeout(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.WriteTimeout = 50 * time.Millisecond })
	fd := l.enroll()
	fd.establish()
	const size = 1 << 30 // far more than a socket buffers
	w := l.dispatch(fd, Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"},
		ContentStream: io.LimitReader(zeros{}, size), ContentLen: size, Timeout: time.Minute})
	fd.instructionFor(w.ID) // then the device reads nothing more
	eventually(t, "the stuck device was closed", func() bool {
		return len(l.auditReasons(string(EventDisconnected), fd.id)) == 1
	})
	if isSettled(w) || l.callState(w) != protocol.StateDispatchCommitted {
		t.Fatalf("the write is %s, want still committed through the reconnect grace", l.callState(w))
	}
	ack := fd.establish()
	if !slices.Equal(ack.PendingInstructions, []string{w.ID}) {
		t.Fatalf("pending %q, want the write", ack.PendingInstructions)
	}
	none[*protocol.Instruction](t, fd.barrier(), "a committed instruction sent again", nil)
}

// A frame that finds the queue at its bound closes the connection: the
// device has stopped reading, and no frame is ever dropped silently. The
// reading side goes on meanwhile: an acknowledgement never waits on the
// socket.
func TestFullQueueClosesTheConnection(t *testing.T) {
	var logs syncbuf.Buffer
	l := newWSLane(t, withLog(&logs), func(c *Config) { c.WriteTimeout = time.Hour })
	fd := l.enroll()
	fd.establish()
	busy(l, fd) // the write loop is blocked in a write
	c := l.current(fd.id)
	c.w.mu.Lock()
	c.w.bound = 4
	c.w.mu.Unlock()
	fd.barrier() // puts the barrier id in the memo; its resultAck was written before the bound
	r, err := (&protocol.Result{Gen: fd.gen, InstructionID: fd.barrierID, Outcome: protocol.VoidOutcome{}}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * c.w.bound {
		if fd.trySendRaw(websocket.MessageText, r) != nil {
			break
		}
	}
	eventually(t, "the connection was closed", func() bool {
		return len(l.auditReasons(string(EventDisconnected), fd.id)) == 1
	})
	if !strings.Contains(logs.String(), "the device is not reading its socket") {
		t.Fatalf("the close is not logged: %q", logs.String())
	}
}

// No goroutine is started per frame: instruction frames and cancels for a
// device whose socket is stuck wait in the queue, not in goroutines.
func TestNoGoroutinePerFrame(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 34; c.WriteTimeout = time.Hour })
	fd := l.enroll()
	fd.establish()
	busy(l, fd) // two calls in flight; the write loop is blocked in a write
	before := goleak.IgnoreCurrent()
	var calls []*Call
	for range 32 {
		calls = append(calls, l.dispatch(fd, execInstr("x")))
	}
	for _, call := range calls {
		call.Cancel()
	}
	if st := l.callState(calls[31]); st != protocol.StateDispatchCommitted {
		t.Fatalf("the last call is %s, want committed", st)
	}
	goleak.VerifyNone(t, before)
}

// An idle connection has no write loop (its reader is its only goroutine);
// the first frame queued starts one, which stays while an instruction is
// in flight and parks once none is.
func TestTheWriteLoopLivesWhileTheConnectionHasWork(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	c := l.current(fd.id)
	running := func() bool {
		c.w.mu.Lock()
		defer c.w.mu.Unlock()
		return c.w.running
	}
	eventually(t, "the idle connection's write loop parked", func() bool { return !running() })
	call := l.dispatch(fd, execInstr("true"))
	fd.instructionFor(call.ID)
	fd.barrier() // the loop has written everything queued
	if !running() {
		t.Fatal("the write loop parked with an instruction in flight")
	}
	fd.answerExec(call.ID, 0)
	settled(t, call)
	eventually(t, "the write loop parked once nothing was in flight", func() bool { return !running() })
	fd.barrier() // a frame starts it again
}
