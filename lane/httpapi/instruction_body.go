package httpapi

import (
	"github.com/sema-agent/sema/api"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// This file admits the body of POST /v1/devices/{id}/instructions against
// the server-wide content budget (Config.MaxBufferedContent) before a byte
// of it is read.
//
// The kind is only known once the body is parsed, so admission goes by
// Content-Length alone:
//   - a body with Content-Length n reserves n + the most its base64 can
//     decode to (the body and the decoded write content are held together
//     while contentB64 is decoded); a body that could never fit the whole
//     budget is 413 naming the limit, one that does not fit beside what is
//     held now is 503 service.busy with Retry-After;
//   - a body without Content-Length (chunked) reserves and reads at most
//     noLengthBodyLimit (one frame: what any non-write instruction fits in);
//     a longer one, or one whose kind turns out to be of the write family,
//     is 411.
// After parsing, the reservation shrinks to the decoded content (nothing
// for a non-write) and is released once the lane has let go of the
// content: when the payload has been written to the device, or the call
// settles without having been sent, or the request is refused.

// noLengthBodyLimit bounds a body sent without Content-Length.
const noLengthBodyLimit = protocol.MaxFrameBytes

// busyRetryAfter is the Retry-After of a 503 service.busy: about the time a
// 100 MiB write takes to pass through the lane.
const busyRetryAfter = 2 * time.Second

// bodyReservation is what a body of n bytes reserves: itself and the most
// its base64 decodes to.
func bodyReservation(n int64) int64 { return n + int64(b64.DecodedLen(int(n))) }

// maxInstructionBody is the longest body whose reservation fits a budget
// of limit bytes: a single body over it can never be admitted.
func maxInstructionBody(limit int64) int64 {
	n := limit / 7 * 4
	for bodyReservation(n+1) <= limit {
		n++
	}
	return n
}

// readInstructionBody admits the request's body against the budget and
// reads it. On success the caller owns the reservation; on an error
// nothing is held.
func (s *API) readInstructionBody(r *http.Request) ([]byte, *reservation, *apiError) {
	n := r.ContentLength
	if n < 0 {
		return s.readUnsizedBody(r)
	}
	if limit := maxInstructionBody(s.budget.limit); n > limit {
		return nil, nil, errorf(http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge,
			"the request body is %d bytes, over this lane's limit of %d bytes (the body and its decoded content must fit the %d-byte buffered-content budget)",
			n, limit, s.budget.limit)
	}
	hold, ok := s.budget.reserve(bodyReservation(n))
	if !ok {
		return nil, nil, s.busy(r, n)
	}
	// Exactly Content-Length bytes: no growth, no slack (the server has
	// already refused a body longer than its Content-Length).
	body := make([]byte, n)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		hold.release()
		return nil, nil, errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body could not be read in full (%d bytes announced)", n)
	}
	return body, hold, nil
}

// readUnsizedBody reads a body without Content-Length, up to
// noLengthBodyLimit.
func (s *API) readUnsizedBody(r *http.Request) ([]byte, *reservation, *apiError) {
	hold, ok := s.budget.reserve(noLengthBodyLimit)
	if !ok {
		return nil, nil, s.busy(r, noLengthBodyLimit+1)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, noLengthBodyLimit+1))
	switch {
	case err != nil:
		hold.release()
		return nil, nil, errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body could not be read")
	case len(body) > noLengthBodyLimit:
		hold.release()
		return nil, nil, lengthRequired("a request body over %d bytes", noLengthBodyLimit)
	}
	hold.shrinkTo(int64(len(body)))
	return body, hold, nil
}

// busy is the answer when the budget is full for now; it is counted. A
// client that sent "Expect: 100-continue" gets it before sending its body.
// Any other is sending its body already, and would see its connection reset
// instead of the answer if the server closed it unread: the body (at most
// n bytes, within the cap) is read and thrown away first, which holds no
// memory.
func (s *API) busy(r *http.Request, n int64) *apiError {
	s.metrics.contentBusy.Add(1)
	if !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		io.CopyN(io.Discard, r.Body, n)
	}
	e := errorf(http.StatusServiceUnavailable, api.CodeBusy, "the lane holds as much write content as it may at once; retry after %d s", int(busyRetryAfter.Seconds()))
	e.retryAfter = busyRetryAfter
	return e
}

// lengthRequired is 411: what was sent must announce its length.
func lengthRequired(what string, args ...any) *apiError {
	e := errorf(http.StatusLengthRequired, api.CodeLengthRequired, what, args...)
	e.Message += " must carry Content-Length"
	return e
}
