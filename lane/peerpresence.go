package lane

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/sema-agent/sema/api"
)

// The presence of devices another replica holds (issue L item 3). The
// registry says which replica holds a device's live lease, and at which
// generation; what only the holder knows — since when the device is
// connected and how many of its instructions are in flight — a replica
// listing devices asks of each holder, one request per replica for the
// devices of the page, all at once, within presenceTimeout.

// presencePath is the hop-only endpoint a replica asks another for the
// presence of devices on: POST {"deviceIds": [...]}.
const presencePath = "/v1/cluster/presence"

// presenceTimeout bounds what a device list waits for the other replicas;
// one that has not answered by then leaves its devices as the registry
// shows them (online, gen, replica) and inflight counted here.
const presenceTimeout = time.Second

// presenceAskBytes bounds an ask's body: a page of maxDevicePage device
// ids (31 bytes each, quoted, with a comma) and room to spare.
const presenceAskBytes = 64 << 10

type presenceAsk struct {
	DeviceIDs []string `json:"deviceIds"`
}

// heldPresence is a device's presence on the replica that holds it.
type heldPresence struct {
	Online         bool   `json:"online"`
	ConnectedSince string `json:"connectedSince,omitempty"`
	Inflight       int    `json:"inflight"`
}

// servePresence answers another replica's ask: the presence here of the
// devices it names that are connected here or have calls here.
func (s *Server) servePresence(w http.ResponseWriter, r *http.Request) {
	if !s.fromReplica(w, r, "presence") {
		return
	}
	body, aerr := readBodyLimit(r, presenceAskBytes)
	var ask presenceAsk
	if aerr == nil && json.Unmarshal(body, &ask) != nil {
		aerr = errorf(http.StatusBadRequest, codeInvalidJSON, "the body must be {\"deviceIds\": [...]}")
	}
	if aerr == nil && len(ask.DeviceIDs) > maxDevicePage {
		aerr = errorf(http.StatusBadRequest, codeFieldInvalid, "deviceIds: at most %d", maxDevicePage)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out := make(map[string]heldPresence, len(ask.DeviceIDs))
	for _, id := range ask.DeviceIDs {
		p := s.Presence(id)
		if !p.Online && p.Inflight == 0 {
			continue
		}
		h := heldPresence{Online: p.Online, Inflight: p.Inflight}
		if p.Online {
			h.ConnectedSince = wireTime(p.ConnectedSince)
		}
		out[id] = h
	}
	writeJSON(w, http.StatusOK, out)
}

// withHeldPresence completes, for the listed devices another replica
// holds, what their holder knows: connectedSince, and inflight (its calls
// and any this replica still has).
func (s *Server) withHeldPresence(ctx context.Context, devices []api.Device) {
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

func (s *Server) askPresence(ctx context.Context, replica string, devices []api.Device, idx []int) {
	rep, ok, err := s.peers.Lookup(ctx, replica)
	if err != nil || !ok {
		return
	}
	ask := presenceAsk{DeviceIDs: make([]string, len(idx))}
	for k, i := range idx {
		ask.DeviceIDs[k] = devices[i].DeviceID
	}
	body, _ := json.Marshal(ask)
	answer, err := s.forwarder.Ask(ctx, rep.AdvertiseURL, presencePath, body, 1<<20)
	var held map[string]heldPresence
	if err == nil {
		err = json.Unmarshal(answer, &held)
	}
	if err != nil {
		s.log.Warn("lane: a replica did not tell its devices' presence", "replica", replica, "err", err)
		return
	}
	for _, i := range idx {
		h := held[devices[i].DeviceID]
		devices[i].Inflight += h.Inflight
		if h.Online {
			devices[i].ConnectedSince = h.ConnectedSince
		}
	}
}
