package lane

import (
	"context"
	"errors"
	"github.com/sema-agent/sema/api"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Taking a lease over at once (docs/operations.md, replicas). A device that
// reconnects to this replica while its lease is still held by another replica
// (that replica was killed, or drains, or its socket to the device died
// without a close, or closed while work was in flight: the lease is then
// kept for the reconnect grace, device.go) would be refused
// already_connected until the lease expired, one TTL later, and the work
// held there would wait out the grace. Instead this replica asks the holder
// to let the lease go:
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
	path := strings.Replace(api.HandoverPath, "{id}", url.PathEscape(deviceID), 1) + "?holder=" + url.QueryEscape(held.Previous)
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

// ErrDeviceConnectedHere refuses a hand-over: the device's connection to
// this replica is live.
var ErrDeviceConnectedHere = errors.New("lane: the device's connection to this replica is live")

// HandOver lets another replica have a device's lease, which holder held
// here (see above): it drops this replica's hold and releases the lease;
// ErrDeviceConnectedHere when the connection here is fresh, another error
// when the registry fails.
func (s *Server) HandOver(deviceID, holder string) error {
	if !s.letGo(deviceID, holder) {
		return ErrDeviceConnectedHere
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	return s.store.ReleaseLease(ctx, deviceID, holder)
}
