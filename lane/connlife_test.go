package lane

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sema-agent/sema/internal/syncbuf"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// The connection's life through its state machine, on real sockets.

// withLog sends the lane's log to b.
func withLog(b *syncbuf.Buffer) func(*Config) {
	return func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(b, nil)) }
}

// An illegal transition raised on a live connection is refused loudly: an
// error in the lane's log, and the state does not move.
func TestIllegalTransitionIsRefusedLoudly(t *testing.T) {
	var logs syncbuf.Buffer
	l := newWSLane(t, withLog(&logs))
	fd := l.enroll()
	fd.establish()
	c := l.current(fd.id)
	if _, _, err := c.to(evHello); err == nil {
		t.Fatal("a hello event moved an active connection")
	}
	if st := l.connState(fd.id); st != connActive {
		t.Fatalf("state %v after an illegal event, want active", st)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "illegal connection transition: hello in state active") {
		t.Fatalf("the log does not name the illegal transition: %q", got)
	}
	// The connection still works.
	call := l.dispatch(fd, execInstr("true"))
	fd.answerExec(fd.instructionFor(call.ID).InstructionID, 0)
	settled(t, call)
}

// A frame the state does not allow is refused, audited, and leaves the
// device's lock free: a repeated generationAck or goodbye changes nothing,
// a hello on an established connection is dropped pre_hello.
func TestFrameTheStateDoesNotAllowIsRefused(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("sleep 1"))
	fd.instructionFor(call.ID)
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	fd.send(fd.helloFrame())
	grace := int64(60_000)
	fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeSleep, GraceMs: &grace})
	fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeShutdown})
	frames := fd.barrier()
	none[*protocol.Instruction](t, frames, "an instruction re-sent by a repeated generationAck", nil)
	eventually(t, "the repeats were audited", func() bool {
		got := l.auditReasons(string(EventFrameRepeated), fd.id)
		return len(got) == 2 && got[0] == "generationAck" && got[1] == "goodbye" || len(got) == 2 && got[0] == "goodbye" && got[1] == "generationAck"
	})
	l.wantRejected(fd.id, "pre_hello")
	if got := l.auditReasons(string(EventGoodbye), fd.id); len(got) != 1 || got[0] != string(protocol.GoodbyeSleep) {
		t.Fatalf("goodbyes taken: %q, want the first only", got)
	}
	if st := l.connState(fd.id); st != connLeaving {
		t.Fatalf("state %v, want leaving", st)
	}
	d := l.device(fd.id)
	if !d.mu.TryLock() {
		t.Fatal("a refused frame left the device locked")
	}
	d.mu.Unlock()
	// The call still in flight is still collected (R15).
	fd.answerExec(call.ID, 0)
	if s := settled(t, call); s.State != protocol.StateTerminal {
		t.Fatalf("settlement %+v", s)
	}
}

// A hello whose verification outlives the handshake deadline attaches
// nothing: the deadline and the attach are one decision, the deadline's;
// no helloAck, no connection, and the lease it took is released at once.
func TestHelloVerifiedAfterTheDeadlineAttachesNothing(t *testing.T) {
	hooks := &hookStore{}
	l := newWSLane(t, withHooks(hooks))
	fd := l.enroll()
	release := holdHelloAtItsLease(hooks, fd) // the attach is about to move the state
	l.clk.Advance(l.srv.cfg.HandshakeDeadline)
	eventually(t, "the deadline passed", func() bool { return len(l.auditReasons(string(EventHandshakeTimeout), "")) == 1 })
	release()
	fd.expectClosed()
	none[*protocol.HelloAck](t, fd.inbox.Pending, "a helloAck after the deadline", nil)
	if n := len(l.auditReasons(string(EventConnected), fd.id)); n != 0 {
		t.Fatalf("a timed-out hello was audited connected %d times", n)
	}
	if l.current(fd.id) != nil {
		t.Fatal("a timed-out socket became the device's connection")
	}
	fd.establish() // the lease was released: nothing holds the device
}

// holdHelloAtItsLease dials and says hello, and returns once the lane has
// taken the hello's lease, holding it there until release is called.
func holdHelloAtItsLease(hooks *hookStore, fd *fakeDevice) (release func()) {
	entered, held := make(chan struct{}), make(chan struct{})
	hooks.setAcquiredHook(func(store.LeaseRequest) { close(entered); <-held })
	fd.dial()
	fd.send(fd.helloFrame())
	<-entered
	return func() {
		hooks.setAcquiredHook(nil)
		close(held)
	}
}

// Closing a connection leaves no goroutine behind, however it ends: its
// reader, its write loop, its intake worker, a write's payload goroutine
// and its handshake all stop.
func TestClosingAConnectionLeavesNoGoroutine(t *testing.T) {
	ends := []struct {
		name string
		run  func(l *wsLane, fd *fakeDevice)
	}{
		{"the device drops the socket", func(l *wsLane, fd *fakeDevice) {
			fd.establish()
			busy(l, fd)
			fd.drop()
		}},
		{"the lane says bye", func(l *wsLane, fd *fakeDevice) {
			fd.establish()
			busy(l, fd)
			l.srv.kick(fd.id, protocol.ByeRevoked)
			expect(fd, func(*protocol.Bye) bool { return true })
			fd.expectClosed()
		}},
		{"liveness is lost", func(l *wsLane, fd *fakeDevice) {
			fd.establish()
			busy(l, fd)
			l.clk.Advance(3 * l.srv.cfg.HeartbeatInterval)
			fd.expectClosed()
		}},
		{"the goodbye grace ends", func(l *wsLane, fd *fakeDevice) {
			fd.establish()
			grace := int64(1)
			fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeShutdown, GraceMs: &grace})
			eventually(t, "the goodbye was taken", func() bool { return l.connState(fd.id) == connLeaving })
			l.clk.Advance(time.Millisecond)
			fd.expectClosed()
		}},
		{"the hello is rejected", func(l *wsLane, fd *fakeDevice) {
			fd.dial()
			h := fd.helloFrame()
			fd.sign(h, "another nonce")
			fd.send(h)
			fd.expectReject(protocol.RejectAuthFailed)
		}},
		{"the handshake deadline passes", func(l *wsLane, fd *fakeDevice) {
			fd.dial()
			l.clk.Advance(l.srv.cfg.HandshakeDeadline)
			fd.expectClosed()
		}},
	}
	for _, end := range ends {
		t.Run(end.name, func(t *testing.T) {
			l := newWSLane(t)
			fd := l.enroll()
			before := goleak.IgnoreCurrent()
			end.run(l, fd)
			eventually(t, "the lane let go of the socket", func() bool {
				l.srv.mu.Lock()
				preAuth := l.srv.preAuth
				l.srv.mu.Unlock()
				return preAuth == 0 && l.current(fd.id) == nil
			})
			goleak.VerifyNone(t, before)
		})
	}
}

// busy gives a connection every goroutine it can have: a large chunk for
// the intake worker, and a write whose payload is larger than the socket
// can buffer while the device reads nothing more: the write loop blocks in
// a write and the payload goroutine waits for the payload window.
func busy(l *wsLane, fd *fakeDevice) {
	fd.t.Helper()
	run := l.dispatch(fd, execInstr("yes"))
	fd.instructionFor(run.ID)
	fd.chunk(run.ID, 0, protocol.ChunkStdout, strings.Repeat("y", 2*inlineFrameBytes))
	fd.expectChunkAck(run.ID, 0)
	const size = 1 << 30
	w := l.dispatch(fd, Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"},
		ContentStream: io.LimitReader(zeros{}, size), ContentLen: size, Timeout: time.Minute})
	fd.instructionFor(w.ID)
	expect(fd, func(p *protocol.Payload) bool { return p.InstructionID == w.ID && p.Part == protocol.PartBegin })
	eventually(fd.t, "the payload waits for the socket", func() bool {
		c := l.current(fd.id)
		c.w.mu.Lock()
		defer c.w.mu.Unlock()
		return c.w.room != nil
	})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
