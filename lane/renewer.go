package lane

import (
	"context"

	"github.com/sema-agent/sema/lane/store"
)

// The lease renewer keeps this replica's stored leases (§1.4) alive with
// one statement per renewal interval for all of its connections, instead
// of one write per heartbeat: at 15,000 devices and a 15 s heartbeat that
// is one statement every 15 s instead of a thousand a second. The interval
// is a third of the lease TTL, as the per-heartbeat renewal was, so a round
// that fails still leaves a second one before any lease expires.
//
// A connection whose lease the statement did not renew has lost it (taken
// over by another holder, or its device revoked): it is closed, as a
// failed per-connection renewal closed it.
func startLeaseRenewer(s *Server) *periodic {
	return startPeriodic(s.cfg.Clock, s.cfg.LeaseTTL/3, false, s.renewLeases)
}

// renewLeases is one round. A connection is judged only if its lease was
// taken before the round began (leaseRound): the statement, which starts
// after that, sees every such lease, while a lease taken during the round
// may be missing from its answer without being lost.
func (s *Server) renewLeases() {
	round := s.leaseRound.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	s.beatReplica(ctx)
	held, err := s.store.RenewReplicaLeases(ctx, s.replica, s.cfg.LeaseTTL)
	if err != nil {
		s.log.Warn("lane: renewing this replica's leases failed; the next round retries before they expire", "replica", s.replica, "err", err)
		return
	}
	holders := make(map[string]string, len(held))
	for _, l := range held {
		holders[l.DeviceID] = l.Holder
	}
	for _, d := range s.deviceStates() {
		d.mu.Lock()
		if c := d.conn; c != nil && c.leaseRound < round && c.state() != connClosed && holders[d.id] != c.holder {
			s.audit(c.ctx, store.AuditEvent{DeviceID: c.deviceID, Event: string(EventLeaseLost), RemoteAddr: c.remote})
			c.close()
		}
		d.mu.Unlock()
	}
}

// deviceStates is a snapshot of the devices this replica knows.
func (s *Server) deviceStates() []*deviceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*deviceState, 0, len(s.devices))
	for _, d := range s.devices {
		out = append(out, d)
	}
	return out
}
