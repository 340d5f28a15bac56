package lane

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error codes of the management plane (§1.1's table).
const (
	codeInvalidJSON       = "request.invalid_json"
	codeBodyShape         = "request.body_shape"
	codeFieldInvalid      = "request.field_invalid"
	codeBodyTooLarge      = "request.body_too_large"
	codeForbidden         = "auth.forbidden"
	codeEnrollmentInvalid = "device.enrollment_invalid"
	codeDeviceNotFound    = "device.not_found"
	codeRateExceeded      = "limit.rate_exceeded"
	codeLaneRequired      = "capability.device_lane_required"
	codeUnavailable       = "service.unavailable"
	codeBusy              = "service.busy"
	codeLengthRequired    = "request.length_required"
)

// apiError is an error answer: {"errorCode": "...", "message": "..."}.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"errorCode"`
	Message string `json:"message"`
	// retryAfter, when set, is sent as Retry-After (whole seconds).
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// enrollmentInvalidBody is the one answer to the four refusals of §1.1:
// byte-identical on the wire, so that "expired", "unknown", "someone
// else's" and "used with another key" cannot be told apart.
var enrollmentInvalidBody = mustJSON(apiError{
	Code:    codeEnrollmentInvalid,
	Message: "Enrollment was refused. The token may have expired, may already have been used by another device, or may have been issued to a different account. Ask for a new enrollment token and try again.",
})

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, mustJSON(apiError{Code: "internal", Message: "the answer could not be encoded"})
	}
	writeBody(w, status, b)
}

func writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(e.retryAfter), 10))
	}
	writeJSON(w, e.Status, e)
}
