package lane

import (
	"context"
	"time"
)

// leaseReleaseTimeout bounds one release on a context of its own: never
// the caller's, which may already have run out (a Shutdown past its
// deadline, a connection that ended).
const leaseReleaseTimeout = 10 * time.Second

// releaseLease drops one connection's stored lease when it ends. The lease
// is the connection's until another holder takes it, also when a bye
// (draining, revoked) already made it no longer current. The release names
// the holder, so a successor's lease is never touched.
//
// While the replica drains, the connection leaves its lease to the one
// statement of releaseLeases, unless that has begun already: then this
// lease may have been taken after it ran, and is released here.
func (s *Server) releaseLease(deviceID, holder string) {
	s.mu.Lock()
	leftToShutdown := s.draining && !s.releasing
	s.mu.Unlock()
	if leftToShutdown {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	if err := s.store.ReleaseLease(ctx, deviceID, holder); err != nil {
		s.log.Warn("lane: releasing a lease failed; it will expire", "device", deviceID, "err", err)
	}
}

// releaseLeases drops every lease this replica holds, in one statement
// (Shutdown). A connection that ended during the drain left its lease to
// it; releasing is set first, under s.mu, so a connection that saw it
// unset ended before the statement began and its lease is covered.
func (s *Server) releaseLeases() {
	s.mu.Lock()
	s.releasing = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	n, err := s.store.ReleaseReplicaLeases(ctx, s.replica)
	if err != nil {
		s.log.Error("lane: releasing this replica's leases failed; they will expire", "replica", s.replica, "err", err)
		return
	}
	s.log.Info("lane: released this replica's leases", "replica", s.replica, "leases", n)
}
