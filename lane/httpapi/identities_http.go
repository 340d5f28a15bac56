package httpapi

import (
	"errors"
	"net/http"
	"unicode"

	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// Identities and API keys (docs/api.md). Only the admin identity (the one
// `sema server` created on its first start) creates and lists identities;
// every identity manages its own keys, and the admin may revoke any. A
// plaintext key exists only in the answer that issued it.

// identityFields is the closed body of POST /v1/identities.
var identityFields = fieldsOf[api.CreateIdentityRequest](map[string]func(string) string{
	"name": func(v string) string {
		if v == "" {
			return "must not be empty"
		}
		for _, r := range v {
			if unicode.IsControl(r) {
				return "must not contain control characters"
			}
		}
		return maxBytes(255)(v)
	},
})

// adminOnly answers 403 auth.forbidden unless the caller is the admin. A
// lane with no admin (an embedder's) refuses everyone.
func (s *API) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return s.adminOnlyTo("manage identities", h)
}

// adminOnlyTo is adminOnly, its refusal saying what only the admin may do.
func (s *API) adminOnlyTo(what string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !callerOf(r.Context()).Admin {
			writeError(w, errorf(http.StatusForbidden, api.CodeForbidden, "only the lane's admin identity may %s", what))
			return
		}
		h(w, r)
	}
}

// createIdentity is POST /v1/identities {"name"}: a new identity (never an
// admin) and its first API key, shown this once.
func (s *API) createIdentity(w http.ResponseWriter, r *http.Request) {
	f, aerr := readClosedBody(r, identityFields, false)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	idn, key, err := lane.CreateIdentity(r.Context(), s.store, f["name"])
	if errors.Is(err, store.ErrNameTaken) {
		writeError(w, errorf(http.StatusConflict, api.CodeNameTaken, "an identity named %q exists already; names are unique on a lane", clip(f["name"])))
		return
	}
	if err != nil {
		s.unavailable(w, r, "create identity", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: idn.ID, Event: string(lane.EventIdentityCreated), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, api.CreateIdentityResponse{IdentityID: idn.ID, Name: idn.Name, APIKey: key})
}

// listIdentities is GET /v1/identities: every identity, oldest first.
func (s *API) listIdentities(w http.ResponseWriter, r *http.Request) {
	all, err := s.store.ListIdentities(r.Context())
	if err != nil {
		s.unavailable(w, r, "list identities", err)
		return
	}
	out := make([]api.Identity, 0, len(all))
	for _, idn := range all {
		out = append(out, identityView(idn))
	}
	writeJSON(w, http.StatusOK, api.IdentityList{Identities: out})
}

func identityView(idn store.Identity) api.Identity {
	v := api.Identity{IdentityID: idn.ID, Name: idn.Name, CreatedAt: api.WireTime(idn.CreatedAt), Admin: idn.Admin}
	if idn.DisabledAt != nil {
		v.DisabledAt = api.WireTime(*idn.DisabledAt)
	}
	return v
}

// setIdentityDisabled is POST /v1/identities/{id}/disable (disabled) or
// /enable, admin only, with an empty closed body: a disabled identity's
// keys are refused from its next request on; its devices and sessions
// stay. The admin cannot be disabled (409 identity.admin).
func (s *API) setIdentityDisabled(disabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, aerr := readClosedBody(r, nil, true); aerr != nil {
			writeError(w, aerr)
			return
		}
		id := r.PathValue("id")
		idn, err := s.store.SetIdentityDisabled(r.Context(), id, disabled)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, errorf(http.StatusNotFound, api.CodeIdentityNotFound, "no identity %q on this lane", clip(id)))
			return
		case errors.Is(err, store.ErrAdminNotDisabled):
			writeError(w, errorf(http.StatusConflict, api.CodeAdminNotDisabled, "the admin identity cannot be disabled: the lane would have no admin"))
			return
		case err != nil:
			s.unavailable(w, r, "disable identity", err)
			return
		}
		event := lane.EventIdentityEnabled
		if disabled {
			event = lane.EventIdentityDisabled
		}
		s.audit(r.Context(), store.AuditEvent{IdentityID: idn.ID, Event: string(event), RemoteAddr: lane.RemoteAddr(r)})
		writeJSON(w, http.StatusOK, identityView(idn))
	}
}

// createAPIKey is POST /v1/api-keys with an empty closed body: another key
// for the caller, shown this once.
func (s *API) createAPIKey(w http.ResponseWriter, r *http.Request) {
	if _, aerr := readClosedBody(r, nil, true); aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	held, err := s.store.ListAPIKeys(r.Context(), caller.ID)
	if err != nil {
		s.unavailable(w, r, "create api key", err)
		return
	}
	if max := s.core.Config().MaxAPIKeysPerIdentity; len(held) >= max {
		writeError(w, errorf(http.StatusConflict, api.CodeAPIKeyLimit,
			"you hold %d API keys, this lane's most per identity (sema server --max-api-keys-per-identity); revoke one first", max))
		return
	}
	k, key, err := lane.IssueAPIKey(r.Context(), s.store, caller.ID)
	if err != nil {
		s.unavailable(w, r, "create api key", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, Event: string(lane.EventAPIKeyCreated), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, api.CreateAPIKeyResponse{KeyID: k.ID, APIKey: key})
}

func apiKeyView(k store.APIKey) api.APIKey {
	v := api.APIKey{KeyID: k.ID, CreatedAt: api.WireTime(k.CreatedAt)}
	if k.LastUsedAt != nil {
		v.LastUsedAt = api.WireTime(*k.LastUsedAt)
	}
	if k.RevokedAt != nil {
		v.RevokedAt = api.WireTime(*k.RevokedAt)
	}
	return v
}

// listAPIKeys is GET /v1/api-keys: the caller's keys that are not revoked,
// never the keys themselves.
func (s *API) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.store.ListAPIKeys(r.Context(), callerOf(r.Context()).ID)
	if err != nil {
		s.unavailable(w, r, "list api keys", err)
		return
	}
	out := make([]api.APIKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, apiKeyView(k))
	}
	writeJSON(w, http.StatusOK, api.APIKeyList{APIKeys: out})
}

// revokeAPIKey is DELETE /v1/api-keys/{keyId}: the caller's own key (the
// admin's: any), refused at once from then on. Another identity's key is
// 404 like none; the admin's last key is 409.
func (s *API) revokeAPIKey(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r.Context())
	owner := caller.ID
	if caller.Admin {
		owner = "" // the admin may revoke any identity's key
	}
	id := r.PathValue("keyId")
	k, err := s.store.RevokeAPIKey(r.Context(), owner, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errorf(http.StatusNotFound, api.CodeAPIKeyNotFound, "you have no API key %q", clip(id)))
		return
	case errors.Is(err, store.ErrLastAdminKey):
		writeError(w, errorf(http.StatusConflict, api.CodeLastAdminKey, "%s is the admin's last API key: create another first, so the lane is never without an admin key", clip(id)))
		return
	case err != nil:
		s.unavailable(w, r, "revoke api key", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: k.IdentityID, Event: string(lane.EventAPIKeyRevoked), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, apiKeyView(k))
}

// readClosedBody reads a request body and parses it as parseClosedBody
// does (the handlers of identities, keys and sessions share it).
func readClosedBody(r *http.Request, fields []bodyField, allowEmpty bool) (map[string]string, *apiError) {
	body, aerr := readBody(r)
	if aerr != nil {
		return nil, aerr
	}
	return parseClosedBody(body, fields, allowEmpty)
}

// whoami is GET /v1/whoami: the caller's own identity, as the admin's list
// shows it.
func (s *API) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, identityView(callerOf(r.Context())))
}
