package lane

import (
	"errors"
	"net/http"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

func deviceView(d store.Device) api.Device {
	b := api.Device{
		DeviceID: d.ID, DisplayName: d.DisplayName, PlatformOS: d.PlatformOS, PlatformArch: d.PlatformArch,
		WorkspaceRoot: d.WorkspaceRoot, CreatedAt: wireTime(d.CreatedAt), Revoked: d.Revoked(),
	}
	if d.RevokedAt != nil {
		b.RevokedAt = wireTime(*d.RevokedAt)
	}
	return b
}

// wireTime is an RFC 3339 UTC time with milliseconds, as JavaScript's
// toISOString writes it.
func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// listDevices is GET /v1/devices: one page of the caller's own devices,
// oldest first, and the cursor of the next page (devices_page.go).
func (s *Server) listDevices(w http.ResponseWriter, r *http.Request) {
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
func (s *Server) revokeDevice(w http.ResponseWriter, r *http.Request) {
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
		writeError(w, errorf(http.StatusNotFound, codeDeviceNotFound, "you have no device %q", clip(id)))
		return
	case err != nil:
		s.unavailable(w, r, "revoke device", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, DeviceID: d.ID, Event: eventRevoked, RemoteAddr: remoteAddr(r)})
	s.kick(d.ID, protocol.ByeRevoked) // R13: bye revoked, work in flight written off
	writeJSON(w, http.StatusOK, deviceView(d))
}
