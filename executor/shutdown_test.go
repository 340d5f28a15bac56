package executor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

func (h *harness) waitGoodbye(c interface {
	WaitFrame(ctx contextT, match func(protocol.DeviceFrame) bool) (protocol.DeviceFrame, error)
}) *protocol.Goodbye {
	h.t.Helper()
	f, err := c.WaitFrame(h.ctx(), func(f protocol.DeviceFrame) bool { _, ok := f.(*protocol.Goodbye); return ok })
	if err != nil {
		h.t.Fatal(err)
	}
	return f.(*protocol.Goodbye)
}

// Shutdown (R15, §1.6): goodbye, in-flight work finishes, an instruction
// that arrives after goodbye is failed explicitly, results are flushed, and
// Run returns nil.
func TestShutdownFinishesInflightWork(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	g := newGate(t)
	id := newID()
	c.Send(execIn(1, id, "echo $$; "+g.wait()+"; echo finished", 0))
	h.pidOf(id)
	h.cancel()
	bye := h.waitGoodbye(c)
	if bye.Reason != protocol.GoodbyeShutdown || bye.Gen != 1 || bye.GraceMs == nil || *bye.GraceMs <= 0 {
		t.Errorf("goodbye %+v", bye)
	}
	late := newID()
	c.Send(execIn(1, late, "echo should not run", 0))
	r, err := h.lane.Ledger.WaitResult(h.ctx(), late)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "error:target_unavailable" {
		t.Errorf("instruction after goodbye: %s", outcomeOf(t, r))
	}
	g.open(t)
	r, err = h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "exec:0" {
		t.Errorf("in-flight result %s", outcomeOf(t, r))
	}
	if err := h.runErr(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := c.WaitEnd(h.ctx()); err != nil {
		t.Error(err)
	}
	st := h.waitStatus(func(s executorStatus) bool { return s.Stopped })
	if st.Connected {
		t.Errorf("status after exit %+v", st)
	}
}

// Work that outlives the shutdown grace is stopped (its group killed) and
// answered aborted before the executor exits.
func TestShutdownStopsWorkPastTheGrace(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	id := newID()
	c.Send(execIn(1, id, "echo $$; exec sleep 1000", 0))
	pid := h.pidOf(id)
	h.cancel()
	h.waitGoodbye(c)
	// The lane can read the goodbye before the executor sees its write
	// return: the grace must not fire before then, or the goodbye counts as
	// unsent and nothing is flushed.
	if st := h.waitStatus(func(s executorStatus) bool { return s.Stopping }); !slices.Equal(st.Inflight, []string{id}) {
		t.Errorf("status while stopping: in flight %v, want [%s]", st.Inflight, id)
	}
	h.clock.WaitTimer(h.ctx(), func(d time.Duration) bool { return d == 90*time.Second })
	h.clock.Advance(90 * time.Second)
	r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "error:aborted" {
		t.Errorf("outcome %s", outcomeOf(t, r))
	}
	if err := h.runErr(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if alive(pid) {
		t.Errorf("pid %d outlived the executor", pid)
	}
}

// Shutdown while disconnected: nothing to say goodbye on; the work is
// stopped and Run returns nil.
func TestShutdownWhileDisconnected(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	id := newID()
	c.Send(execIn(1, id, "echo $$; exec sleep 1000", 0))
	pid := h.pidOf(id)
	c.Close()
	h.clock.WaitTimer(h.ctx(), isBackoff)
	h.cancel()
	if err := h.runErr(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if alive(pid) {
		t.Errorf("pid %d outlived the executor", pid)
	}
}
