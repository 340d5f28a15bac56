package lane

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Taking a lease over at once (issue L item 4). A device that reconnects
// to this replica while its lease is still held by another replica (that
// replica was killed, or drains, or its socket to the device died without
// a close) would be refused already_connected until the lease expired, one
// TTL later. Instead this replica asks the holder to let the lease go:
//
//   - the holder keeps a connection that is fresh (a frame within the
//     liveness limit, R14) and answers 409: another executor instance is
//     live, and the hello is refused already_connected, as on one replica;
//   - otherwise it drops what it has of the device (a stale socket gets bye
//     superseded), settles the device's in-flight work outcome_unknown
//     (R2: "a connection that lands on a different replica loses them";
//     R13), releases the lease and answers 200;
//   - a holder nothing listens for (its process is gone) cannot answer, and
//     neither can a replica whose heartbeat went stale or whose row is gone:
//     their leases are taken over. A holder that is merely slow to answer,
//     with a live heartbeat, keeps the lease: the device retries.
//
// The instructions a dead replica had in flight died with it: their callers
// saw their streams break (or, forwarded, outcome_unknown), and the device
// is told of none of them (pendingInstructions is empty), so it stops them
// and nothing is ever run again (R2).

// handoverPath is the hop-only endpoint a replica asks another to let a
// device's lease go on: POST, with ?holder= the lease's holder.
const handoverPath = "/v1/cluster/devices/{id}/handover"

// handoverTimeout bounds one ask; the device's handshake deadline runs.
const handoverTimeout = 2 * time.Second

// handedOver asks the replica that holds lease to let it go and reports
// whether this replica may now take it over.
func (s *Server) handedOver(ctx context.Context, deviceID, remote string, held store.Lease) bool {
	if s.forwarder == nil || held.PreviousReplica == "" || held.PreviousReplica == s.replica {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	rep, ok, err := s.peers.Lookup(ctx, held.PreviousReplica)
	switch {
	case err != nil:
		return false // the registry cannot be read: nothing is judged
	case !ok:
		return true // the replica's row is gone: it ended, or was removed as dead
	}
	path := "/v1/cluster/devices/" + url.PathEscape(deviceID) + "/handover?holder=" + url.QueryEscape(held.Previous)
	status, err := s.forwarder.Send(ctx, rep.AdvertiseURL, http.MethodPost, path, "", remote)
	switch {
	case err == nil:
		return status == http.StatusOK
	case cluster.NothingListens(err):
		return true
	default:
		return !rep.Live
	}
}

// serveHandover answers another replica's ask (see above): 200 when the
// lease is let go, 409 when the device's connection here is fresh.
func (s *Server) serveHandover(w http.ResponseWriter, r *http.Request) {
	if !s.fromReplica(w, r, "a device's lease") {
		return
	}
	deviceID, holder := r.PathValue("id"), r.URL.Query().Get("holder")
	if holder == "" {
		writeError(w, errorf(http.StatusBadRequest, codeFieldInvalid, "holder: the lease's holder is required"))
		return
	}
	if !s.letGo(deviceID, holder) {
		writeError(w, errorf(http.StatusConflict, codeDeviceConnected, "the device's connection to this replica is live"))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	if err := s.store.ReleaseLease(ctx, deviceID, holder); err != nil {
		s.unavailable(w, r, "release a lease", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// letGo drops this replica's hold on a device another replica has the
// device's new connection for, unless the connection here is fresh.
func (s *Server) letGo(deviceID, holder string) bool {
	s.mu.Lock()
	d, ok := s.devices[deviceID]
	s.mu.Unlock()
	if !ok {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.conn; c != nil {
		if c.holder != holder {
			// A newer connection here than the lease asked about: it holds
			// the device's lease (or is taking it), and is not let go.
			return false
		}
		if !c.stale() && !s.isDraining() {
			return false
		}
		s.drop(d, c, protocol.ByeSuperseded)
	}
	d.stopGrace()
	s.settleAll(d,
		laneFailure(protocol.ErrOutcomeUnknown, "the device reconnected to another lane replica while the instruction was in flight; it may have run"),
		laneFailure(protocol.ErrTargetUnavailable, "the device reconnected to another lane replica before the instruction was sent"))
	return true
}

// fromReplica refuses (403) a request to a hop-only endpoint that no
// replica of this lane's cluster signed; what names what is asked for.
func (s *Server) fromReplica(w http.ResponseWriter, r *http.Request, what string) bool {
	if s.hop == nil || !cluster.IsHop(r) {
		writeError(w, errorf(http.StatusForbidden, codeForbidden, "only a replica of this lane's cluster may ask for %s", what))
		return false
	}
	if _, err := s.hop.Verify(r); err != nil {
		writeError(w, errorf(http.StatusForbidden, codeForbidden, "the forwarded request is not valid: %v", err))
		return false
	}
	return true
}
