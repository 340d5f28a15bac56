package lane

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// This replica's row in the registry (docs/operations.md): registered by New
// when Config.AdvertiseURL is set, its heartbeat beaten by the lease
// renewer's rounds, marked draining when Shutdown begins and removed when it
// ends. The row is what the other replicas on the registry see of this one.

// CheckAdvertiseURL refuses an advertise URL the other replicas could not
// dial (Config.AdvertiseURL); "" is no URL.
func CheckAdvertiseURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("lane: AdvertiseURL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("lane: AdvertiseURL %q must be an http or https URL with a host, as http://10.0.0.5:8080", raw)
	}
	return nil
}

// registerReplica records this replica; New fails if the registry refuses.
func (s *Server) registerReplica(ctx context.Context) error {
	if s.cfg.AdvertiseURL == "" {
		return nil
	}
	if err := s.store.RegisterReplica(ctx, s.replica, s.cfg.AdvertiseURL); err != nil {
		return fmt.Errorf("lane: recording this replica in the registry: %w", err)
	}
	return nil
}

// replicaPruneAfter is how long a replica's row outlives its last
// heartbeat: a killed replica never removes its own, and each start has a
// new id. Its leases expired long before (a lease lasts one LeaseTTL
// without renewal), and a replica partitioned from the registry that long
// registers again on its next heartbeat.
const replicaPruneAfter = time.Hour

// beatReplica is one heartbeat. A row gone (a peer removed it as dead
// while this replica could not reach the registry) is registered again.
func (s *Server) beatReplica(ctx context.Context) {
	if s.cfg.AdvertiseURL == "" {
		return
	}
	err := s.store.HeartbeatReplica(ctx, s.replica)
	if errors.Is(err, store.ErrNotFound) {
		err = s.store.RegisterReplica(ctx, s.replica, s.cfg.AdvertiseURL)
	}
	if err != nil {
		s.log.Warn("lane: this replica's heartbeat failed; the next round retries", "replica", s.replica, "err", err)
	}
	if _, err := s.store.PruneReplicas(ctx, replicaPruneAfter); err != nil {
		s.log.Warn("lane: pruning the rows of dead replicas failed; the next round retries", "err", err)
	}
	s.refreshHopKeys(ctx)
	if err := s.peers.Refresh(ctx); err != nil {
		s.log.Warn("lane: reading the other replicas failed; the next round retries", "replica", s.replica, "err", err)
	}
}

// markReplicaDraining tells the other replicas this one is shutting down.
func (s *Server) markReplicaDraining() {
	if s.cfg.AdvertiseURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	if err := s.store.MarkReplicaDraining(ctx, s.replica); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("lane: marking this replica draining failed", "replica", s.replica, "err", err)
	}
}

// removeReplica deletes this replica's row once its leases are released.
func (s *Server) removeReplica() {
	if s.cfg.AdvertiseURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	if err := s.store.RemoveReplica(ctx, s.replica); err != nil {
		s.log.Warn("lane: removing this replica's row failed; it goes stale", "replica", s.replica, "err", err)
	}
}
