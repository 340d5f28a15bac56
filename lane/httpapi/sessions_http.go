package httpapi

import (
	"errors"
	"net/http"

	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// rebindFields is the closed body of POST /v1/sessions/{rootSessionId}/rebind.
var rebindFields = fieldsOf[api.RebindRequest](map[string]func(string) string{"deviceId": maxBytes(64)})

func sessionView(b store.Session) api.Session {
	return api.Session{RootSessionID: b.RootSessionID, DeviceID: b.DeviceID, BoundAt: api.WireTime(b.BoundAt)}
}

// rootSessionParam is the path's rootSessionId, or the 400 naming what is
// wrong with it.
func rootSessionParam(r *http.Request) (string, *apiError) {
	id := r.PathValue("rootSessionId")
	if problem := lane.CheckRootSessionID(id); problem != "" {
		return "", errorf(http.StatusBadRequest, api.CodeFieldInvalid, "rootSessionId %s", problem)
	}
	return id, nil
}

// getSession is GET /v1/sessions/{rootSessionId}: the caller's binding, 404
// when unbound (or bound by another identity: indistinguishable).
func (s *API) getSession(w http.ResponseWriter, r *http.Request) {
	id, aerr := rootSessionParam(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	b, err := s.store.Session(r.Context(), callerOf(r.Context()).ID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errorf(http.StatusNotFound, api.CodeSessionNotFound, "root session %q is not bound to a device of yours", clip(id)))
		return
	case err != nil:
		s.unavailable(w, r, "read session", err)
		return
	}
	writeJSON(w, http.StatusOK, sessionView(b))
}

// rebindSession is POST /v1/sessions/{rootSessionId}/rebind {"deviceId"}:
// §9's explicit change of device, which also binds an unbound session. A
// device the caller does not own is 404 like an unknown one; a revoked
// device is 409 (nothing could ever run there).
func (s *API) rebindSession(w http.ResponseWriter, r *http.Request) {
	id, aerr := rootSessionParam(r)
	var f map[string]string
	if aerr == nil {
		f, aerr = readClosedBody(r, rebindFields, false)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	deviceID := f["deviceId"]
	dev, err := s.store.Device(r.Context(), deviceID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && dev.OwnerID != caller.ID):
		writeError(w, deviceNotFound(deviceID))
		return
	case err != nil:
		s.unavailable(w, r, "read device", err)
		return
	case dev.Revoked():
		writeError(w, errorf(http.StatusConflict, api.CodeDeviceRevoked, "device %s is revoked: a session cannot be bound to it", dev.ID))
		return
	}
	max := s.core.Config().MaxSessionsPerIdentity
	b, err := s.store.RebindSession(r.Context(), caller.ID, id, dev.ID, max)
	switch {
	case errors.Is(err, store.ErrSessionLimit):
		writeError(w, sessionLimit(&lane.SessionLimitError{RootSessionID: id, Max: max}))
		return
	case err != nil:
		s.unavailable(w, r, "rebind session", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, DeviceID: dev.ID, Event: string(lane.EventSessionRebound), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, sessionView(b))
}

// sessionLimit is the 409 of a binding past the identity's bound.
func sessionLimit(e *lane.SessionLimitError) *apiError {
	return errorf(http.StatusConflict, api.CodeSessionLimit, "%s", e.Error())
}

// deleteSession is DELETE /v1/sessions/{rootSessionId}: the caller's
// binding goes (the next instruction of that session binds it anew); 404
// when unbound, or bound by another identity: indistinguishable.
func (s *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	id, aerr := rootSessionParam(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	switch err := s.store.DeleteSession(r.Context(), caller.ID, id); {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errorf(http.StatusNotFound, api.CodeSessionNotFound, "root session %q is not bound to a device of yours", clip(id)))
		return
	case err != nil:
		s.unavailable(w, r, "delete session", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, Event: string(lane.EventSessionUnbound), RemoteAddr: lane.RemoteAddr(r)})
	w.WriteHeader(http.StatusNoContent)
}
