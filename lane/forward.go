package lane

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
)

// Dispatch from any replica (issue L item 2). A replica that does not hold
// a device's connection forwards the device's instructions, streamed
// writes and cancels to the one that does, over the hop of package
// cluster; the holder alone commits and sends (R1), and its NDJSON comes
// back byte for byte. A device held by no live replica is dispatched here,
// and settles as a device that is not connected does.

// startCluster makes this replica's hop and forwarder, with the registry's
// cluster secret (the first replica stores it). Only a replica with an
// AdvertiseURL is part of a cluster.
func (s *Server) startCluster(ctx context.Context) error {
	if s.cfg.AdvertiseURL == "" {
		return nil
	}
	secret, err := s.store.ClusterSecret(ctx, rand.Text()+rand.Text())
	if err != nil {
		return fmt.Errorf("lane: reading the cluster secret: %w", err)
	}
	s.hop, err = cluster.NewHop(secret, s.replica, s.cfg.Clock.Now)
	if err != nil {
		return err
	}
	s.peers = cluster.NewDirectory(func(ctx context.Context) ([]store.Replica, error) {
		// Live: a heartbeat within the lease TTL, three rounds of the
		// renewer that beats it (renewer.go).
		return s.store.ListReplicas(ctx, s.cfg.LeaseTTL)
	})
	s.forwarder = cluster.NewForwarder(s.hop, s.log)
	s.forwarder.Refused = func(w http.ResponseWriter, r *http.Request, err error) {
		s.log.Warn("lane: the replica holding the device is unreachable", "path", r.URL.Path, "err", err)
		writeError(w, errorf(http.StatusServiceUnavailable, codeUnavailable,
			"the lane replica holding this device cannot be reached; nothing was dispatched; try again"))
	}
	s.forwarder.Unknown = func(w http.ResponseWriter, r *http.Request, err error) {
		s.log.Warn("lane: the replica holding the device failed during a forward", "path", r.URL.Path, "err", err)
		writeError(w, errorf(http.StatusBadGateway, api.CodeOutcomeUnknown,
			"the lane replica holding this device failed while answering; the instruction may have run, and is not dispatched again"))
	}
	return nil
}

// verifyHop refuses a request that carries a hop no replica of this
// registry signed; a request without one passes. A valid hop's client
// address becomes the request's remote address, so what the holder audits
// names the caller, not the replica that forwarded it (issue L item 2).
func (s *Server) verifyHop(r *http.Request) (*http.Request, *apiError) {
	if !cluster.IsHop(r) {
		return r, nil
	}
	if s.hop == nil {
		return r, errorf(http.StatusForbidden, codeForbidden, "this lane is not a replica of a cluster; a forwarded request is refused")
	}
	fwd, err := s.hop.Verify(r)
	if err != nil {
		return r, errorf(http.StatusForbidden, codeForbidden, "the forwarded request is not valid: %v", err)
	}
	if fwd.ClientAddr != "" {
		r = r.WithContext(r.Context())
		r.RemoteAddr = fwd.ClientAddr
	}
	return r, nil
}

// routed serves a device's endpoint here, or forwards it to the replica
// holding the device's connection. A forwarded request is never forwarded
// again: a device that moved meanwhile settles here as not connected.
func (s *Server) routed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.forwarder == nil || cluster.IsHop(r) || s.Presence(r.PathValue("id")).Online {
			h(w, r)
			return
		}
		base, ok := s.holderOf(r.Context(), r.PathValue("id"))
		if !ok {
			h(w, r)
			return
		}
		s.metrics.forwarded.Add(1)
		// The body is sent on while the answer comes back (a streamed
		// write's accepted line comes before its body is read): HTTP/1.1
		// must not drain the body when the answer begins.
		http.NewResponseController(w).EnableFullDuplex()
		s.forwarder.Forward(w, r, base, remoteAddr(r))
	}
}

// holderOf is the URL of the other live replica holding a live lease on
// the device, by the registry; false when there is none.
func (s *Server) holderOf(ctx context.Context, deviceID string) (*url.URL, bool) {
	dev, err := s.store.Device(ctx, deviceID)
	if err != nil || !dev.Leased || dev.LeaseReplica == "" || dev.LeaseReplica == s.replica {
		return nil, false
	}
	rep, ok, err := s.peers.Lookup(ctx, dev.LeaseReplica)
	if err != nil || !ok || !rep.Live {
		return nil, false
	}
	u, err := url.Parse(rep.AdvertiseURL)
	return u, err == nil
}

// cancelElsewhere asks every other live replica to cancel an instruction
// this one does not know: the one that dispatched it answers 202.
func (s *Server) cancelElsewhere(r *http.Request, id string) bool {
	if s.forwarder == nil || cluster.IsHop(r) {
		return false
	}
	if err := s.peers.Refresh(r.Context()); err != nil {
		return false
	}
	path := "/v1/instructions/" + url.PathEscape(id) + "/cancel"
	for _, rep := range s.peers.Live(s.replica) {
		status, err := s.forwarder.Send(r.Context(), rep.AdvertiseURL, http.MethodPost, path, r.Header.Get("Authorization"), remoteAddr(r))
		if err == nil && status == http.StatusAccepted {
			return true
		}
	}
	return false
}
