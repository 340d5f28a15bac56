package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// deviceQueryKeys is the closed set of GET /v1/devices' query.
var deviceQueryKeys = []string{"limit", "after", "online"}

// deviceQuery is a parsed GET /v1/devices query.
type deviceQuery struct {
	limit  int
	after  string // a device id of the caller's; "" from the oldest
	online bool
}

// parseDeviceQuery reads limit, after and online from a raw query: each at
// most once, no other key; errors name the key and never echo a value.
func parseDeviceQuery(raw string) (deviceQuery, *apiError) {
	q := deviceQuery{limit: api.DefaultDevicePage}
	field := func(format string, args ...any) (deviceQuery, *apiError) {
		return q, errorf(http.StatusBadRequest, api.CodeFieldInvalid, format, args...)
	}
	values, aerr := closedQuery(raw, deviceQueryKeys, "the device list")
	if aerr != nil {
		return q, aerr
	}
	if v, ok := values["limit"]; ok {
		n, err := parsePositive(v[0])
		if err != nil || n > api.MaxDevicePage {
			return field("limit must be an integer from 1 to %d", api.MaxDevicePage)
		}
		q.limit = int(n)
	}
	if v, ok := values["after"]; ok {
		if !validDeviceID(v[0]) {
			return field("after must be the next of an earlier answer (a device id)")
		}
		q.after = v[0]
	}
	if v, ok := values["online"]; ok {
		if v[0] != "true" {
			return field("online must be true (or absent, for every device)")
		}
		q.online = true
	}
	return q, nil
}

func validDeviceID(s string) bool {
	u, ok := strings.CutPrefix(s, ids.Device)
	return ok && protocol.ValidULID(u)
}

// devicePage reads one page of an owner's devices with their presence here,
// and the cursor of the next page: "" when none follows. It reads one
// device past the page to know. With online, it filters the registry's
// pages, read api.MaxDevicePage at a time, until it holds limit+1 connected
// devices or reaches the end: so next is "" exactly when no connected
// device followed at the time of reading.
func (s *API) devicePage(ctx context.Context, ownerID string, q deviceQuery) ([]api.Device, string, error) {
	chunk := q.limit + 1
	if q.online {
		chunk = api.MaxDevicePage
	}
	out := make([]api.Device, 0, min(q.limit, 64))
	after := q.after
	for {
		rows, err := s.store.ListDevices(ctx, ownerID, store.DevicePage{After: after, Limit: chunk})
		if err != nil {
			return nil, "", err
		}
		for _, d := range rows {
			v := s.deviceWithPresence(d)
			if q.online && !v.Online {
				continue
			}
			if len(out) == q.limit {
				return out, out[len(out)-1].DeviceID, nil
			}
			out = append(out, v)
		}
		if len(rows) < chunk {
			return out, "", nil
		}
		after = rows[len(rows)-1].ID
	}
}

// deviceWithPresence is a device as listed: with its presence on this
// replica, or, in a cluster, on the replica whose live lease the registry
// shows (docs/api.md: presence is per replica, and any replica lists it).
func (s *API) deviceWithPresence(d store.Device) api.Device {
	v := deviceView(d)
	p := s.core.Presence(d.ID)
	v.Inflight = p.Inflight // also while in the reconnect grace
	switch {
	case p.Online:
		v.Online, v.Gen, v.ConnectedSince = true, p.Gen.String(), api.WireTime(p.ConnectedSince)
		if s.forwarder != nil {
			v.Replica = s.replica
		}
	case s.forwarder != nil && d.Leased && d.LeaseReplica != "" && d.LeaseReplica != s.replica:
		// Held by another replica: the registry's
		// presence, a live lease; withHeldPresence asks the holder for
		// the rest.
		v.Online, v.Gen, v.Replica = true, protocol.Gen(d.Generation).String(), d.LeaseReplica
	}
	return v
}

// errAfterUnknown answers an after that names no device of the caller's.
func errAfterUnknown() *apiError {
	return errorf(http.StatusBadRequest, api.CodeFieldInvalid, "after names no device of yours (pass the next of an earlier answer)")
}
