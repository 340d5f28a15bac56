package lane

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/protocol"
)

// deviceState is everything this replica holds for one device: its current
// connection, the instructions committed to it, the ones queued for an
// in-flight slot, and the reconnect grace. One lock guards it all; frames,
// timers and dispatches take it in turn.
type deviceState struct {
	id    string
	mu    sync.Mutex
	conn  *conn  // the current connection (lease held), or nil
	epoch string // the epoch of the last accepted hello
	calls map[string]*Call
	// inflight is len(calls), readable without mu: a connection's write
	// loop parks only when it is zero (writer.go).
	inflight atomic.Int32
	queue    []*Call
	grace    clock.Timer // the reconnect grace, while there is no connection
	// graceHolder is the holder whose stored lease this replica keeps (and
	// renews) while the grace runs, so that the device reconnecting to
	// another replica asks this one for it (handover.go), which then
	// settles the work here at once instead of at the grace's end.
	graceHolder string
}

func (s *Server) device(id string) *deviceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[id]
	if !ok {
		d = &deviceState{id: id, calls: map[string]*Call{}}
		s.devices[id] = d
	}
	return d
}

// sortedCalls lists the committed calls in dispatch order.
func (d *deviceState) sortedCalls() []*Call {
	out := make([]*Call, 0, len(d.calls))
	for _, c := range d.calls {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Call) int { return int(a.frame.IssuedSeq - b.frame.IssuedSeq) })
	return out
}

// pump commits queued calls into free in-flight slots (d.mu held) and
// queues their instruction frames, in issuedSeq order. The commit is
// crossed here, before the first byte of the instruction frame is written
// (§5.0, R1): whatever happens to the socket afterwards, the call is never
// sent again. A write's payload follows from its own goroutine (send.go).
func (s *Server) pump(d *deviceState) {
	c := d.conn
	if c == nil || c.state() != connActive {
		return
	}
	for len(d.queue) > 0 && len(d.calls) < s.cfg.MaxInflight {
		call := d.queue[0]
		d.queue = d.queue[1:]
		call.state = protocol.StateDispatchCommitted
		call.dispatchedAt = s.cfg.Clock.Now()
		c.issuedSeq++
		call.frame.Gen, call.frame.IssuedSeq = c.gen, c.issuedSeq
		call.stream = newStream(call.Kind, s.cfg.ReorderEntries, s.cfg.ReorderBytes)
		d.calls[call.ID] = call
		d.inflight.Store(int32(len(d.calls)))
		// R12: the server's backstop; it keeps running through disconnects.
		call.ceiling = s.cfg.Clock.AfterFunc(time.Duration(call.frame.TimeoutMs)*time.Millisecond+s.cfg.ExecutionGrace, func() {
			s.ceilingPassed(d, call)
		})
		c.sendInstruction(call)
	}
}

func (s *Server) ceilingPassed(d *deviceState, c *Call) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.state != protocol.StateDispatchCommitted {
		return
	}
	s.cancelRemote(d, c)
	s.settle(d, c, protocol.StateTerminal, laneFailure(protocol.ErrOutcomeUnknown,
		"the device gave no result within timeoutMs (%d ms) plus the %v execution grace; the command may have run", c.frame.TimeoutMs, s.cfg.ExecutionGrace))
}

// cancel is Call.Cancel (R11).
func (s *Server) cancel(c *Call) {
	d := s.device(c.DeviceID)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch c.state {
	case protocol.StateQueued:
		s.settle(d, c, protocol.StateTerminalNeverStarted, protocol.CancelledOutcome{State: protocol.CancelNotStarted})
	case protocol.StateDispatchCommitted:
		c.cancelWant = true
		s.deliverCancel(d, c)
	}
}

// deliverCancel sends a wanted cancel on the current connection, at most
// once per generation, and (re)starts the cancel grace (d.mu held). With no
// active connection it waits: the first active tick after a same-epoch
// reconnect replays it. A connection that said goodbye still runs its
// in-flight work (R15), so it still takes cancels.
func (s *Server) deliverCancel(d *deviceState, c *Call) {
	conn := cancelTo(d, c)
	if conn == nil {
		return
	}
	// The grace restarts before the cancel is queued: the write loop may
	// put it on the wire before d.mu is released.
	if c.cancelTimer != nil {
		c.cancelTimer.Stop()
	}
	c.cancelTimer = s.cfg.Clock.AfterFunc(s.cfg.CancelGrace, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if c.state == protocol.StateDispatchCommitted {
			s.settle(d, c, protocol.StateTerminal, laneFailure(protocol.ErrOutcomeUnknown,
				"the device did not answer a cancel within %v; the command may have run", s.cfg.CancelGrace))
		}
	})
	sendCancel(conn, c)
}

// cancelRemote tells the device to stop work the lane has written off
// (best effort: the answer will only hit the settled memo; d.mu held).
func (s *Server) cancelRemote(d *deviceState, c *Call) {
	if conn := cancelTo(d, c); conn != nil {
		sendCancel(conn, c)
	}
}

// cancelTo is the connection a cancel of c may be queued on now (d.mu
// held): the current one, if it takes cancels, holds c's generation, and
// was not sent one for c yet (at most once per generation). Else nil.
func cancelTo(d *deviceState, c *Call) *conn {
	conn := d.conn
	if conn == nil || !conn.state().takesCancels() || c.frame.Gen != conn.gen || c.cancelGen == conn.gen {
		return nil
	}
	return conn
}

// sendCancel queues a cancel of c (d.mu held). Queued after the call's
// instruction frame, it cannot overtake it.
func sendCancel(conn *conn, c *Call) {
	c.cancelGen = conn.gen
	conn.send(&protocol.Cancel{Gen: conn.gen, InstructionID: c.ID})
}

// startGrace starts the reconnect grace for a device left without a
// connection (d.mu held), if it has work; it reports whether the lease of
// holder, the connection that ended, is kept for the grace. When the grace
// runs out the books close (R4) and the lease is released.
func (s *Server) startGrace(d *deviceState, holder string) bool {
	if d.grace != nil || len(d.calls)+len(d.queue) == 0 {
		return false
	}
	d.graceHolder = holder
	d.notify(DeviceNotice{Grace: s.cfg.ReconnectGrace})
	d.grace = s.cfg.Clock.AfterFunc(s.cfg.ReconnectGrace, func() {
		d.mu.Lock()
		if d.conn != nil || d.grace == nil {
			d.mu.Unlock()
			return
		}
		held := d.stopGrace()
		s.settleAll(d,
			laneFailure(protocol.ErrOutcomeUnknown, "the device did not reconnect within the %v reconnect grace; the command may have run", s.cfg.ReconnectGrace),
			laneFailure(protocol.ErrTargetUnavailable, "the device did not reconnect within the %v reconnect grace", s.cfg.ReconnectGrace))
		d.mu.Unlock()
		s.releaseLease(d.id, held)
	})
	return true
}

// stopGrace ends the reconnect grace (d.mu held). It returns the holder of
// the lease kept for it, "" if no grace was running: whoever stops it
// releases that lease or has just taken it over.
func (d *deviceState) stopGrace() (heldBy string) {
	if d.grace == nil {
		return ""
	}
	d.grace.Stop()
	heldBy, d.grace, d.graceHolder = d.graceHolder, nil, ""
	return heldBy
}

// notify tells every call of the device, committed or queued, of n (d.mu
// held).
func (d *deviceState) notify(n DeviceNotice) {
	for _, c := range d.calls {
		c.notice(n)
	}
	for _, c := range d.queue {
		c.notice(n)
	}
}

// Presence is what this replica knows of a device's connection.
type Presence struct {
	Online bool
	// Leaving: the device said goodbye; it finishes its work in flight and
	// takes no new work (R15), so a dispatch now is target_unavailable.
	Leaving        bool
	Gen            protocol.Gen
	ConnectedSince time.Time
	Inflight       int
}

// Presence reports a device's connection on this replica (§8: presence
// assumes a single replica).
func (s *Server) Presence(deviceID string) Presence {
	s.mu.Lock()
	d, ok := s.devices[deviceID]
	s.mu.Unlock()
	if !ok {
		return Presence{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := Presence{Inflight: len(d.calls)}
	if c := d.conn; c != nil && c.state().online() {
		p.Online, p.Gen, p.ConnectedSince = true, c.gen, c.connectedAt
		p.Leaving = c.state() == connLeaving
	}
	return p
}
