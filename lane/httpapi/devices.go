package httpapi

import (
	"errors"
	"github.com/sema-agent/sema/lane"
	"net/http"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

func deviceView(d store.Device) api.Device {
	b := api.Device{
		DeviceID: d.ID, DisplayName: d.DisplayName, PlatformOS: d.PlatformOS, PlatformArch: d.PlatformArch,
		WorkspaceRoot: d.WorkspaceRoot, CreatedAt: api.WireTime(d.CreatedAt), Revoked: d.Revoked(),
	}
	if d.RevokedAt != nil {
		b.RevokedAt = api.WireTime(*d.RevokedAt)
	}
	return b
}

// listDevices is GET /v1/devices: one page of the caller's own devices,
// oldest first, and the cursor of the next page (devices_page.go).
func (s *API) listDevices(w http.ResponseWriter, r *http.Request) {
	q, aerr := parseDeviceQuery(r.URL.RawQuery)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	devices, next, err := s.devicePage(r.Context(), callerOf(r.Context()).ID, q)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errAfterUnknown())
		return
	case err != nil:
		s.unavailable(w, r, "list devices", err)
		return
	}
	s.withHeldPresence(r.Context(), devices)
	writeJSON(w, http.StatusOK, api.DeviceList{Devices: devices, Next: next})
}

// revokeDevice is POST /v1/devices/{id}/revoke: terminal, audited, and only
// for the caller's own device (another's is indistinguishable from none).
func (s *API) revokeDevice(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(r)
	if aerr == nil {
		_, aerr = parseClosedBody(body, nil, true)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	id := r.PathValue("id")
	d, err := s.store.RevokeDevice(r.Context(), caller.ID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errorf(http.StatusNotFound, api.CodeDeviceNotFound, "you have no device %q", clip(id)))
		return
	case err != nil:
		s.unavailable(w, r, "revoke device", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, DeviceID: d.ID, Event: string(lane.EventRevoked), RemoteAddr: lane.RemoteAddr(r)})
	s.core.Revoke(d.ID) // R13: bye revoked, work in flight written off
	writeJSON(w, http.StatusOK, deviceView(d))
}
