package httpapi

import (
	"errors"
	"net/http"

	"github.com/sema-agent/sema/api"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/cluster"
)

// serveHandover answers another replica's ask (see above): 200 when the
// lease is let go, 409 when the device's connection here is fresh.
func (s *API) serveHandover(w http.ResponseWriter, r *http.Request) {
	if !s.fromReplica(w, r, "a device's lease") {
		return
	}
	deviceID, holder := r.PathValue("id"), r.URL.Query().Get("holder")
	if holder == "" {
		writeError(w, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "holder: the lease's holder is required"))
		return
	}
	switch err := s.core.HandOver(deviceID, holder); {
	case errors.Is(err, lane.ErrDeviceConnectedHere):
		writeError(w, errorf(http.StatusConflict, api.CodeDeviceConnected, "the device's connection to this replica is live"))
		return
	case err != nil:
		s.unavailable(w, r, "release a lease", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// fromReplica refuses (403) a request to a hop-only endpoint that no
// replica of this lane's cluster signed; what names what is asked for.
func (s *API) fromReplica(w http.ResponseWriter, r *http.Request, what string) bool {
	if s.hop == nil || !cluster.IsHop(r) {
		writeError(w, errorf(http.StatusForbidden, api.CodeForbidden, "only a replica of this lane's cluster may ask for %s", what))
		return false
	}
	if _, err := s.hop.Verify(r); err != nil {
		writeError(w, errorf(http.StatusForbidden, api.CodeForbidden, "the forwarded request is not valid: %v", err))
		return false
	}
	return true
}
