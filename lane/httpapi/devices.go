package httpapi

import (
	"errors"
	"net/http"

	"github.com/sema-agent/sema/lane"

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

// renameFields is the closed body of POST /v1/devices/{id}/rename: the
// name is bounded as enrollment bounds it.
var renameFields = fieldsOf[api.RenameDeviceRequest](map[string]func(string) string{
	"displayName": func(v string) string {
		if v == "" {
			return "must not be empty"
		}
		return maxBytes(255)(v)
	},
})

// renameDevice is POST /v1/devices/{id}/rename.
func (s *API) renameDevice(w http.ResponseWriter, r *http.Request) {
	s.changeOwnDevice(w, r, "rename device", renameFields, false, lane.EventRenamed, func(owner, id string, f map[string]string) (store.Device, error) {
		return s.store.RenameDevice(r.Context(), owner, id, f["displayName"])
	})
}

// revokeDevice is POST /v1/devices/{id}/revoke: terminal.
func (s *API) revokeDevice(w http.ResponseWriter, r *http.Request) {
	d, ok := s.changeOwnDevice(w, r, "revoke device", nil, true, lane.EventRevoked, func(owner, id string, _ map[string]string) (store.Device, error) {
		return s.store.RevokeDevice(r.Context(), owner, id)
	})
	if ok {
		s.core.Revoke(d.ID) // R13: bye revoked, work in flight written off
	}
}

// forgetDevice is POST /v1/devices/{id}/forget: a revoked device's row
// goes (its audit rows stay). The admin may forget any identity's.
func (s *API) forgetDevice(w http.ResponseWriter, r *http.Request) {
	s.changeOwnDevice(w, r, "forget device", nil, true, lane.EventForgotten, func(owner, id string, _ map[string]string) (store.Device, error) {
		if callerOf(r.Context()).Admin {
			owner = ""
		}
		return s.store.ForgetDevice(r.Context(), owner, id)
	})
}

// changeOwnDevice reads a closed body of fields, applies change (op) to
// the device {id}, audits it as event on the device's owner and answers
// the device. change is given the caller as the owner: another identity's
// device is indistinguishable from none (ErrNotFound).
func (s *API) changeOwnDevice(w http.ResponseWriter, r *http.Request, op string, fields []bodyField, allowEmpty bool, event lane.EventName,
	change func(owner, id string, f map[string]string) (store.Device, error)) (store.Device, bool) {
	body, aerr := readBody(r)
	var f map[string]string
	if aerr == nil {
		f, aerr = parseClosedBody(body, fields, allowEmpty)
	}
	if aerr != nil {
		writeError(w, aerr)
		return store.Device{}, false
	}
	caller := callerOf(r.Context())
	id := r.PathValue("id")
	d, err := change(caller.ID, id, f)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errorf(http.StatusNotFound, api.CodeDeviceNotFound, "you have no device %q", clip(id)))
		return d, false
	case errors.Is(err, store.ErrNotRevoked):
		writeError(w, errorf(http.StatusConflict, api.CodeDeviceNotRevoked, "device %q is not revoked: only a revoked device is forgotten (revoke it first)", clip(id)))
		return d, false
	case err != nil:
		s.unavailable(w, r, op, err)
		return d, false
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: d.OwnerID, DeviceID: d.ID, Event: string(event), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, deviceView(d))
	return d, true
}
