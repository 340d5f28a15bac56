package lane

import (
	"fmt"
	"slices"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/protocol"
)

// The end of one instruction's walk (doc.go): its settlement closes the
// device's books on it, enters its id in the settled memo (memo.go), hands
// the caller its settlement (call.go's finish) and refills the freed
// in-flight slot (device.go's pump).

// Failure outcomes the lane settles with itself.
func laneFailure(code protocol.ErrorCode, format string, args ...any) protocol.Outcome {
	return protocol.Failure{ErrorCode: code, Message: fmt.Sprintf(format, args...)}
}

// settle ends a call (d.mu held): it leaves the device's books, its id
// enters the settled memo if it was ever committed, the caller gets its
// settlement, and the freed slot is refilled.
func (s *Server) settle(d *deviceState, c *Call, state protocol.InstructionState, o protocol.Outcome) {
	if c.state == protocol.StateTerminal || c.state == protocol.StateTerminalNeverStarted {
		return
	}
	committed := c.state == protocol.StateDispatchCommitted
	if !committed {
		c.dropContent() // never sent: no send goroutine will
	}
	laneCancelled := c.droppedFrom >= 0
	if laneCancelled {
		o = s.overflowOutcome(c, o) // the caller did not get all the output
	}
	c.state = state
	if f, ok := o.(protocol.Failure); ok && c.contentShort != "" {
		// The device's answer to a short upload (§3.4's check at the
		// commit) is the consequence; the cause comes first.
		f.Message = c.contentShort + "; the device answered: " + f.Message
		o = f
	}
	s.metrics.settled(state, o)
	for _, t := range []clock.Timer{c.ceiling, c.gapTimer, c.cancelTimer} {
		if t != nil {
			t.Stop()
		}
	}
	delete(d.calls, c.ID)
	d.inflight.Store(int32(len(d.calls)))
	if len(d.calls) == 0 && d.conn != nil {
		d.conn.w.signal() // its write loop may park now
	}
	if i := slices.Index(d.queue, c); i >= 0 {
		d.queue = slices.Delete(d.queue, i, i+1)
	}
	s.callsMu.Lock()
	delete(s.calls, c.ID)
	if len(s.calls) == 0 && s.drainWatch.Load() {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
	if committed {
		s.memo.add(c.ID, d.id)
	} else {
		s.neverStarted.add(c.ID, d.id)
	}
	s.callsMu.Unlock()
	c.finish(Settlement{State: state, Outcome: o, LaneCancelled: laneCancelled})
	s.history.add(s.historyRow(c, o))
	s.pump(d)
}

// settleAll ends every call of the device (d.mu held): committed ones
// terminal with o, queued ones terminal_never_started with queued.
func (s *Server) settleAll(d *deviceState, o, queued protocol.Outcome) {
	for _, c := range d.sortedCalls() {
		s.settle(d, c, protocol.StateTerminal, o)
	}
	for len(d.queue) > 0 {
		s.settle(d, d.queue[0], protocol.StateTerminalNeverStarted, queued)
	}
}
