package lane

import (
	"context"
	"time"
)

// janitorEvery is how often the janitor prunes the registry's idle rows.
const janitorEvery = time.Hour

// The janitor prunes what the registry keeps only while it is used: root
// session bindings unused for Config.SessionIdleExpiry (§9 binds a session
// to a device; a binding nobody uses any more only counts against its
// identity's Config.MaxSessionsPerIdentity). It prunes at start and every
// janitorEvery.
func startJanitor(s *Server) *periodic {
	return startPeriodic(s.cfg.Clock, janitorEvery, true, s.pruneSessions)
}

func (s *Server) pruneSessions() {
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	n, err := s.store.PruneSessions(ctx, s.cfg.SessionIdleExpiry)
	switch {
	case err != nil:
		s.log.Warn("lane: pruning idle root session bindings failed; the next round retries", "err", err)
	case n > 0:
		s.log.Info("lane: pruned idle root session bindings", "bindings", n, "idle", s.cfg.SessionIdleExpiry)
	}
}
