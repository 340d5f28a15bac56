package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sema-agent/sema/api"
)

// apiError is an error answer, sent as api.Error.
type apiError struct {
	Status  int
	Code    string
	Message string
	// retryAfter, when set, is sent as Retry-After (whole seconds).
	retryAfter time.Duration
	// written: the answer has been sent already (busy answers at once).
	written bool
	// challenge, when set, is sent as WWW-Authenticate.
	challenge string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// enrollmentInvalidBody is the one answer to the four refusals of §1.1:
// byte-identical on the wire, so that "expired", "unknown", "someone
// else's" and "used with another key" cannot be told apart.
var enrollmentInvalidBody = mustJSON(api.Error{
	Code:    api.CodeEnrollmentInvalid,
	Message: api.EnrollmentInvalidText,
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
		status, b = http.StatusInternalServerError, mustJSON(api.Error{Code: api.CodeInternal, Message: "the answer could not be encoded"})
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
	if e.written {
		return
	}
	if e.challenge != "" {
		w.Header().Set("WWW-Authenticate", e.challenge)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(e.retryAfter), 10))
	}
	writeJSON(w, e.Status, api.Error{Code: e.Code, Message: e.Message})
}
