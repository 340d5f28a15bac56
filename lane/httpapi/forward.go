package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/lane/cluster"
)

// Dispatch from any replica (docs/operations.md). A replica that does not hold
// a device's connection forwards the device's instructions, streamed
// writes and cancels to the one that does, over the hop of package
// cluster; the holder alone commits and sends (R1), and its NDJSON comes
// back byte for byte. A device held by no live replica is dispatched here,
// and settles as a device that is not connected does.

// verifyHop refuses a request that carries a hop no replica of this
// registry signed; a request without one passes. A valid hop's client
// address becomes the request's remote address, so what the holder audits
// names the caller, not the replica that forwarded it.
func (s *API) verifyHop(r *http.Request) (*http.Request, *apiError) {
	if !cluster.IsHop(r) {
		return r, nil
	}
	if _, done := r.Context().Value(hopVerifiedKey{}).(bool); done {
		return r, nil
	}
	if s.hop == nil {
		return r, errorf(http.StatusForbidden, api.CodeForbidden, "this lane is not a replica of a cluster; a forwarded request is refused")
	}
	fwd, err := s.hop.Verify(r)
	if err != nil {
		return r, errorf(http.StatusForbidden, api.CodeForbidden, "the forwarded request is not valid: %v", err)
	}
	// The sender must be a replica the registry lists as live, not merely
	// one that holds the cluster secret.
	if rep, ok, err := s.peers.Lookup(r.Context(), fwd.From); err != nil || !ok || !rep.Live {
		return r, errorf(http.StatusForbidden, api.CodeForbidden, "the forwarded request names a sender that is not a live replica of this registry")
	}
	r = r.WithContext(context.WithValue(r.Context(), hopVerifiedKey{}, true))
	if fwd.ClientAddr != "" {
		r.RemoteAddr = fwd.ClientAddr
	}
	return r, nil
}

// hopVerifiedKey marks a request whose hop was verified: a hop is verified
// once (its nonce is spent by the first verification).
type hopVerifiedKey struct{}

// routed serves a device's endpoint here, or forwards it to the replica
// holding the device's connection. The holder authenticates the caller
// (the request keeps its Authorization), so routing comes first and this
// replica reads only where the device is. A forwarded request is never
// forwarded again: the holder serves it, or sends it back unread when the
// device's connection is not there (421), and the forwarding replica routes
// it once more by the registry's word.
func (s *API) routed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.forwarder == nil:
			h(w, r)
		case cluster.IsHop(r):
			s.serveHop(h, w, r)
		case !plausibleAPIKey(r):
			// Not even the shape of a key: refused here, with no registry
			// read and nothing forwarded (authenticated answers the 403).
			h(w, r)
		case s.core.Presence(r.PathValue("id")).Online:
			h(w, r)
		default:
			s.forward(h, w, r)
		}
	}
}

// serveHop serves a request another replica forwarded, or sends it back
// unread (421 with cluster.HeaderMisdirected) when the device's connection
// is not here: nothing is dispatched, so the sender may route it again. A
// hop that does not verify is refused by authenticated (403).
func (s *API) serveHop(h http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
	r, aerr := s.verifyHop(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if !s.core.Presence(r.PathValue("id")).Online {
		w.Header().Set(cluster.HeaderMisdirected, "1")
		writeError(w, errorf(http.StatusMisdirectedRequest, api.CodeUnavailable,
			"this lane replica does not hold the device's connection; nothing was dispatched"))
		return
	}
	h(w, r)
}

// plausibleAPIKey reports whether the request's credential has the shape
// of an API key (its prefix and length), without asking the registry.
func plausibleAPIKey(r *http.Request) bool {
	key, ok := bearer(r)
	return ok && strings.HasPrefix(key, api.APIKeyPrefix) && len(key) == len(api.APIKeyPrefix)+43
}

// replayLimit is the largest request body read whole before it is
// forwarded, so that a forward sent back (421) or that could not reach a
// replica is sent again whole. An exec instruction's body is well below
// it; a larger body, or a streamed write, is forwarded as it arrives and
// is routed by the registry's word each time.
const replayLimit = 8 << 10

// forward sends a request for a device not connected here to the replica
// holding it, or serves it here when none does (it then settles as a
// device that is not connected does).
func (s *API) forward(h http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	held, replayable := []byte(nil), r.ContentLength >= 0 && r.ContentLength <= replayLimit
	if replayable {
		held = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, held); err != nil {
			writeError(w, errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body could not be read in full (%d bytes announced)", r.ContentLength))
			return
		}
	}
	// A body held whole is given to the forwarder as it is, and to a
	// handler here as a new reader of it.
	rewind := func() {
		if replayable {
			r.Body = io.NopCloser(bytes.NewReader(held))
		}
	}
	// The body is sent on while the answer comes back (a streamed write's
	// accepted line comes before its body is read): HTTP/1.1 must not
	// drain the body when the answer begins.
	http.NewResponseController(w).EnableFullDuplex()
	for try := 0; ; try++ {
		// A remembered route serves the first try of a body that can be
		// sent again; the registry decides every other.
		base, remembered := s.route(r.Context(), id, try > 0 || !replayable)
		rewind()
		if base == nil {
			h(w, r)
			return
		}
		switch s.forwarder.Forward(w, r, base, lane.RemoteAddr(r), held) {
		case cluster.Answered:
			return
		case cluster.Unreached:
			s.routes.Forget(id)
			if remembered {
				continue
			}
			s.log.Warn("lane: the replica holding the device is unreachable", "path", r.URL.Path, "replica_url", base.Redacted())
			writeError(w, errorf(http.StatusServiceUnavailable, api.CodeUnavailable,
				"the lane replica holding this device cannot be reached; nothing was dispatched; try again"))
			return
		case cluster.Misdirected:
			s.routes.Forget(id)
			if !replayable {
				writeError(w, errorf(http.StatusServiceUnavailable, api.CodeUnavailable,
					"the device moved to another lane replica while the request was forwarded; nothing was dispatched; try again"))
				return
			}
			if try > 0 {
				// The registry still names a replica that does not hold
				// the device: its connection is gone, and the lease not
				// yet released. Served here, it settles as not connected.
				rewind()
				h(w, r)
				return
			}
		}
	}
}

// route is the URL of the replica to forward a device's request to, nil
// to serve it here; remembered when it came from s.routes, not the
// registry (fresh asks the registry).
func (s *API) route(ctx context.Context, deviceID string, fresh bool) (base *url.URL, remembered bool) {
	if !fresh {
		if _, base, ok := s.routes.Get(deviceID); ok {
			return base, true
		}
	}
	replica, base, ok := s.holderOf(ctx, deviceID)
	if !ok {
		s.routes.Forget(deviceID)
		return nil, false
	}
	s.routes.Put(deviceID, replica, base)
	return base, false
}

// holderOf is the other live replica holding a live lease on the device,
// by the registry, and its URL; false when there is none.
func (s *API) holderOf(ctx context.Context, deviceID string) (string, *url.URL, bool) {
	dev, err := s.store.Device(ctx, deviceID)
	if err != nil || !dev.Leased || dev.LeaseReplica == "" || dev.LeaseReplica == s.replica {
		return "", nil, false
	}
	rep, ok, err := s.peers.Lookup(ctx, dev.LeaseReplica)
	if err != nil || !ok || !rep.Live {
		return "", nil, false
	}
	u, err := url.Parse(rep.AdvertiseURL)
	return rep.ID, u, err == nil
}

// cancelElsewhere asks every other live replica to cancel an instruction
// this one does not know: the one that dispatched it answers 202.
func (s *API) cancelElsewhere(r *http.Request, id string) bool {
	if s.forwarder == nil || cluster.IsHop(r) {
		return false
	}
	if err := s.peers.Refresh(r.Context()); err != nil {
		return false
	}
	path := "/v1/instructions/" + url.PathEscape(id) + "/cancel"
	for _, rep := range s.peers.Live(s.replica) {
		status, err := s.forwarder.Send(r.Context(), rep.AdvertiseURL, http.MethodPost, path, r.Header.Get("Authorization"), lane.RemoteAddr(r))
		if err == nil && status == http.StatusAccepted {
			return true
		}
	}
	return false
}
