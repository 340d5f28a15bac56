package lane

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
)

// The replicas of one registry (§8): a replica with an AdvertiseURL signs
// the hop to the others, keeps the directory of the live ones and a
// forwarder to reach them. The HTTP API forwards a device's requests over
// them (package httpapi); the core asks a holder to hand a device over
// (handover.go).

// maxRoutes bounds the routes a replica remembers (about 100 bytes each).
const maxRoutes = 1 << 16

// Cluster is this replica's part in a cluster of replicas on one registry.
type Cluster struct {
	Replica   string             // this replica's id
	Hop       *cluster.Hop       // signs and verifies the requests between replicas
	Peers     *cluster.Directory // the replicas of the registry
	Forwarder *cluster.Forwarder // reaches them; Shutdown closes it
	Routes    *cluster.Routes    // where the devices this replica forwards for were
}

// Cluster returns this replica's part in its cluster, nil when it has no
// AdvertiseURL (one replica alone).
func (s *Server) Cluster() *Cluster {
	if s.forwarder == nil {
		return nil
	}
	return &Cluster{Replica: s.replica, Hop: s.hop, Peers: s.peers, Forwarder: s.forwarder, Routes: s.routes}
}

// startCluster makes this replica's hop and forwarder, with the registry's
// cluster secret (the first replica stores it). Only a replica with an
// AdvertiseURL is part of a cluster.
func (s *Server) startCluster(ctx context.Context) error {
	if s.cfg.AdvertiseURL == "" {
		return nil
	}
	secrets, err := s.store.ClusterSecrets(ctx, rand.Text()+rand.Text())
	if err != nil {
		return fmt.Errorf("lane: reading the cluster secret: %w", err)
	}
	s.hop, err = cluster.NewHop(secrets.Current, s.replica, s.cfg.Clock.Now)
	if err == nil {
		err = s.hop.SetKeys(hopKeys(secrets, s.cfg.LeaseTTL))
	}
	if err != nil {
		return err
	}
	s.peers = cluster.NewDirectory(func(ctx context.Context) ([]store.Replica, error) {
		// Live: a heartbeat within the lease TTL, three rounds of the
		// renewer that beats it (renewer.go).
		return s.store.ListReplicas(ctx, s.cfg.LeaseTTL)
	})
	// A route is a hint the replica it names corrects (421), so it may
	// be kept as long as a lease lasts.
	s.routes = cluster.NewRoutes(s.cfg.LeaseTTL, maxRoutes, s.cfg.Clock.Now)
	s.forwarder = cluster.NewForwarder(s.hop, s.log)
	return nil
}

// hopKeys are the secrets a replica signs and verifies hops with, given
// the registry's (sema server rotate-cluster-secret). A rotation is taken
// in phases of phase, the lease TTL: every replica reads the secrets each
// renewal round, three a phase, so within the first phase all of them
// verify both secrets while each still signs with the previous one; in
// the second they sign with the new one and still verify the previous
// (a hop signed just before lives HopWindow); after that only the new one
// is valid.
func hopKeys(secrets store.ClusterSecrets, phase time.Duration) cluster.Keys {
	current, previous := secrets.Current, secrets.Previous
	switch ago := secrets.RotatedAgo; {
	case previous == "" || previous == current || ago >= 2*phase+cluster.HopWindow:
		return cluster.Keys{Sign: current, Verify: []string{current}}
	case ago < phase:
		return cluster.Keys{Sign: previous, Verify: []string{previous, current}}
	default:
		return cluster.Keys{Sign: current, Verify: []string{current, previous}}
	}
}

// refreshHopKeys reads the cluster secrets again, for a rotation.
func (s *Server) refreshHopKeys(ctx context.Context) {
	secrets, err := s.store.ClusterSecrets(ctx, rand.Text()+rand.Text())
	if err == nil {
		err = s.hop.SetKeys(hopKeys(secrets, s.cfg.LeaseTTL))
	}
	if err != nil {
		s.log.Warn("lane: reading the cluster secret failed; the next round retries", "err", err)
	}
}
