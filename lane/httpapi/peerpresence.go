package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/sema-agent/sema/api"
)

// The presence of devices another replica holds (docs/operations.md). The
// registry says which replica holds a device's live lease, and at which
// generation; what only the holder knows — since when the device is
// connected and how many of its instructions are in flight — a replica
// listing devices asks of each holder, one request per replica for the
// devices of the page, all at once, within presenceTimeout.

// presenceTimeout bounds what a device list waits for the other replicas;
// one that has not answered by then leaves its devices as the registry
// shows them (online, gen, replica) and inflight counted here.
const presenceTimeout = time.Second

// presenceAskBytes bounds an ask's body: a page of api.MaxDevicePage device
// ids (31 bytes each, quoted, with a comma) and room to spare.
const presenceAskBytes = 64 << 10

// servePresence answers another replica's ask: the presence here of the
// devices it names that are connected here or have calls here.
func (s *API) servePresence(w http.ResponseWriter, r *http.Request) {
	if !s.fromReplica(w, r, "presence") {
		return
	}
	body, aerr := readBodyLimit(r, presenceAskBytes)
	var ask api.PresenceAsk
	if aerr == nil && json.Unmarshal(body, &ask) != nil {
		aerr = errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the body must be {\"deviceIds\": [...]}")
	}
	if aerr == nil && len(ask.DeviceIDs) > api.MaxDevicePage {
		aerr = errorf(http.StatusBadRequest, api.CodeFieldInvalid, "deviceIds: at most %d", api.MaxDevicePage)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out := make(map[string]api.HeldPresence, len(ask.DeviceIDs))
	for _, id := range ask.DeviceIDs {
		p := s.core.Presence(id)
		if !p.Online && p.Inflight == 0 {
			continue
		}
		h := api.HeldPresence{Online: p.Online, Inflight: p.Inflight}
		if p.Online {
			h.ConnectedSince = api.WireTime(p.ConnectedSince)
		}
		out[id] = h
	}
	writeJSON(w, http.StatusOK, out)
}

// withHeldPresence completes, for the listed devices another replica
// holds, what their holder knows: connectedSince, and inflight (its calls
// and any this replica still has).
func (s *API) withHeldPresence(ctx context.Context, devices []api.Device) {
	if s.forwarder == nil {
		return
	}
	byReplica := map[string][]int{}
	for i, d := range devices {
		if d.Online && d.Replica != "" && d.Replica != s.replica {
			byReplica[d.Replica] = append(byReplica[d.Replica], i)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, presenceTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for replica, idx := range byReplica {
		// Each ask writes only the devices of its own replica.
		wg.Go(func() { s.askPresence(ctx, replica, devices, idx) })
	}
	wg.Wait()
}

func (s *API) askPresence(ctx context.Context, replica string, devices []api.Device, idx []int) {
	rep, ok, err := s.peers.Lookup(ctx, replica)
	if err != nil || !ok {
		return
	}
	ask := api.PresenceAsk{DeviceIDs: make([]string, len(idx))}
	for k, i := range idx {
		ask.DeviceIDs[k] = devices[i].DeviceID
	}
	body, _ := json.Marshal(ask)
	answer, err := s.forwarder.Ask(ctx, rep.AdvertiseURL, api.PresencePath, body, 1<<20)
	var held map[string]api.HeldPresence
	if err == nil {
		err = json.Unmarshal(answer, &held)
	}
	if err != nil {
		s.log.Warn("lane: a replica did not tell its devices' presence", "replica", replica, "err", err)
		return
	}
	for _, i := range idx {
		// The holder knows best: a lease it keeps for the reconnect grace
		// of a dropped connection is not a device online.
		h := held[devices[i].DeviceID]
		devices[i].Inflight += h.Inflight
		devices[i].Online = h.Online
		if h.Online {
			devices[i].ConnectedSince = h.ConnectedSince
		}
	}
}
