package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// rateLimited applies the §1.1 budget, failing closed, before the body or
// the token is looked at: a refused attempt never consumes a token.
func (s *API) rateLimited(w http.ResponseWriter, r *http.Request, b bucket) bool {
	caller := callerOf(r.Context())
	ok, wait, err := s.limiter.allow(caller.ID, b)
	if err != nil {
		s.log.Error("rate limiter unavailable; refusing", "err", err)
		wait, ok = time.Second, false
	}
	if ok {
		return false
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, Event: string(lane.EventRateLimited), Reason: string(b), RemoteAddr: lane.RemoteAddr(r)})
	w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(wait), 10))
	writeError(w, errorf(http.StatusTooManyRequests, api.CodeRateExceeded, "over the enrollment budget of %d requests per %d s; wait out retry-after", enrollRateLimit, int(enrollRateWindow.Seconds())))
	return true
}

// issueEnrollToken is POST /v1/devices/enroll-tokens: a closed empty body,
// the plaintext token exactly once, issued to the caller.
func (s *API) issueEnrollToken(w http.ResponseWriter, r *http.Request) {
	if s.rateLimited(w, r, bucketIssue) {
		return
	}
	body, aerr := readBody(r)
	if aerr == nil {
		_, aerr = parseClosedBody(body, nil, true)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	token := lane.NewSecret(api.EnrollTokenPrefix)
	tok, err := s.store.CreateEnrollToken(r.Context(), caller.ID, store.DigestOf(token), s.cfg.TokenTTL)
	if err != nil {
		s.unavailable(w, r, "issue enroll token", err)
		return
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, Event: string(lane.EventTokenIssued), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, api.EnrollTokenResponse{Token: token, ExpiresAt: api.WireTime(tok.ExpiresAt), TTLSec: int64(tok.TTL / time.Second)})
}

// enrollFields is the closed body of POST /v1/devices/enroll (§1.1): the
// keys of api.EnrollRequest, each with the check of its value.
var enrollFields = fieldsOf[api.EnrollRequest](map[string]func(string) string{
	"token": func(v string) string {
		if n := utf8.RuneCountInString(v); n < 1 || n > 256 {
			return "must be 1–256 characters"
		}
		return ""
	},
	"pubkey": checkPubkey,
	"platformOs": func(v string) string {
		if !protocol.PlatformOS(v).Valid() {
			return `must be "darwin" or "linux"`
		}
		return ""
	},
	"platformArch": maxBytes(32),
	"displayName":  maxBytes(255),
	"workspaceRoot": func(v string) string {
		if v == "" {
			return "must not be empty"
		}
		return maxBytes(1024)(v)
	},
})

// checkPubkey: the raw 32-byte Ed25519 public key in canonical standard
// base64 (44 characters): no whitespace, no other alphabet, exact padding.
func checkPubkey(v string) string {
	if len(v) > 128 {
		return "must be at most 128 bytes"
	}
	if !protocol.CanonicalBase64(v) {
		return "must be standard base64 (44 characters, no whitespace)"
	}
	if raw, _ := base64.StdEncoding.DecodeString(v); len(raw) != 32 {
		return "must be a raw 32-byte Ed25519 public key"
	}
	return ""
}

// enroll is POST /v1/devices/enroll, answering every row of §1.1's table.
func (s *API) enroll(w http.ResponseWriter, r *http.Request) {
	if s.rateLimited(w, r, bucketRegister) {
		return
	}
	body, aerr := readBody(r)
	var f map[string]string
	if aerr == nil {
		f, aerr = parseClosedBody(body, enrollFields, false)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	if t := enrollTokenOf(r.Context()); t != "" && t != f["token"] {
		// A token is the credential for enrolling with itself, no other.
		writeBody(w, http.StatusForbidden, enrollmentInvalidBody)
		return
	}
	pub, _ := base64.StdEncoding.DecodeString(f["pubkey"])
	reg := store.Registration{
		TokenDigest: store.DigestOf(f["token"]), IdentityID: caller.ID, PublicKey: pub,
		PlatformOS: f["platformOs"], PlatformArch: f["platformArch"], DisplayName: f["displayName"], WorkspaceRoot: f["workspaceRoot"],
	}
	dev, created, err := s.store.RegisterDevice(r.Context(), reg)
	var refused *store.EnrollRefusedError
	switch {
	case errors.As(err, &refused):
		s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, Event: string(lane.EventEnrollRefused), Reason: string(refused.Reason), RemoteAddr: lane.RemoteAddr(r)})
		writeBody(w, http.StatusForbidden, enrollmentInvalidBody)
		return
	case err != nil:
		s.unavailable(w, r, "register device", err)
		return
	}
	event := lane.EventEnrolled
	if !created {
		event = lane.EventEnrollReplayed // §1.1: the same 200 and deviceId as the first time
	}
	s.audit(r.Context(), store.AuditEvent{IdentityID: caller.ID, DeviceID: dev.ID, Event: string(event), RemoteAddr: lane.RemoteAddr(r)})
	writeJSON(w, http.StatusOK, api.EnrollResponse{DeviceID: dev.ID})
}
