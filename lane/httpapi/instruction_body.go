package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"

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

// readInstructionBody admits the request's body against the budget, for
// the caller, and reads it at the pace the lane requires (pacedBody). On
// success the caller owns the reservation; on an error nothing is held.
func (s *API) readInstructionBody(w http.ResponseWriter, r *http.Request) ([]byte, *reservation, *apiError) {
	n := r.ContentLength
	if n < 0 {
		return s.readUnsizedBody(w, r)
	}
	if limit := maxInstructionBody(s.budget.limit); n > limit {
		return nil, nil, errorf(http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge,
			"the request body is %d bytes, over this lane's limit of %d bytes (the body and its decoded content must fit the %d-byte buffered-content budget)",
			n, limit, s.budget.limit)
	}
	if bodyReservation(n) > s.budget.perOwner {
		return nil, nil, s.overShare(n)
	}
	hold, ok := s.budget.reserve(callerOf(r.Context()).ID, bodyReservation(n))
	if !ok {
		return nil, nil, s.busy(w, r, n)
	}
	// Exactly Content-Length bytes: no growth, no slack (the server has
	// already refused a body longer than its Content-Length).
	body := make([]byte, n)
	if _, err := io.ReadFull(s.pacedBody(w, r, n), body); err != nil {
		hold.release()
		return nil, nil, bodyReadFailure(err, n)
	}
	return body, hold, nil
}

// readUnsizedBody reads a body without Content-Length, up to
// noLengthBodyLimit.
func (s *API) readUnsizedBody(w http.ResponseWriter, r *http.Request) ([]byte, *reservation, *apiError) {
	hold, ok := s.budget.reserve(callerOf(r.Context()).ID, noLengthBodyLimit)
	if !ok {
		return nil, nil, s.busy(w, r, noLengthBodyLimit)
	}
	body, err := io.ReadAll(io.LimitReader(s.pacedBody(w, r, noLengthBodyLimit), noLengthBodyLimit+1))
	switch {
	case err != nil:
		hold.release()
		return nil, nil, bodyReadFailure(err, -1)
	case len(body) > noLengthBodyLimit:
		hold.release()
		return nil, nil, lengthRequired("a request body over %d bytes", noLengthBodyLimit)
	}
	hold.shrinkTo(int64(len(body)))
	return body, hold, nil
}

// bodyReadFailure answers a body that could not be read: 408 when it
// stopped arriving in time (pacedBody), else 400.
func bodyReadFailure(err error, n int64) *apiError {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errorf(http.StatusRequestTimeout, api.CodeBodyTimeout,
			"the request body did not arrive in time: this lane drops a body that stops for its idle timeout or arrives slower than its minimum rate (sema server --body-idle-timeout, --body-min-rate)")
	}
	if n < 0 {
		return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body could not be read")
	}
	return errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body could not be read in full (%d bytes announced)", n)
}

// pacedBody is r's body, which must keep arriving: before each read the
// connection's read deadline moves to Config.BodyIdleTimeout from now, but
// never past BodyIdleTimeout + n/BodyMinRate from the first read. A body
// that stalls, or trickles, fails its read with os.ErrDeadlineExceeded,
// and whatever it held of the budget is freed at once.
func (s *API) pacedBody(w http.ResponseWriter, r *http.Request, n int64) io.Reader {
	cfg := s.core.Config()
	budget := cfg.BodyIdleTimeout + time.Duration(float64(n)/float64(cfg.BodyMinRate)*float64(time.Second))
	return &pacedReader{r: r.Body, rc: http.NewResponseController(w), idle: cfg.BodyIdleTimeout, budget: budget}
}

type pacedReader struct {
	r      io.Reader
	rc     *http.ResponseController
	idle   time.Duration
	budget time.Duration
	end    time.Time // set at the first read
}

func (p *pacedReader) Read(b []byte) (int, error) {
	now := time.Now()
	if p.end.IsZero() {
		p.end = now.Add(p.budget)
	}
	d := min(now.Add(p.idle).UnixNano(), p.end.UnixNano())
	p.rc.SetReadDeadline(time.Unix(0, d)) // ErrNotSupported on a test recorder: the body is then not paced
	n, err := p.r.Read(b)
	if err != nil {
		p.rc.SetReadDeadline(time.Time{}) // the body is over: the answer's own reads are not limited
	}
	return n, err
}

// busy answers 503 service.busy at once, before any of the body is read,
// and counts it; the connection closes after the answer. A client that
// sent "Expect: 100-continue" never sends its body. Any other is sending
// it already, and would see its connection reset instead of the answer if
// the server closed it unread: up to discard bytes of it (0 for none: a
// streamed write's body may be any size) are then read, at the pace every
// body must keep, and thrown away, which holds nothing of the budget.
func (s *API) busy(w http.ResponseWriter, r *http.Request, discard int64) *apiError {
	s.metrics.contentBusy.Add(1)
	e := errorf(http.StatusServiceUnavailable, api.CodeBusy, "the lane holds as much request content as it may at once, for all callers or for you; retry after %d s", int(busyRetryAfter.Seconds()))
	e.retryAfter = busyRetryAfter
	w.Header().Set("Connection", "close")
	writeError(w, e)
	http.NewResponseController(w).Flush()
	e.written = true
	if discard > 0 && !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		io.CopyN(io.Discard, s.pacedBody(w, r, discard), discard)
	}
	return e
}

// overShare is 413 for a body whose reservation is over what one identity
// may ever hold (Config.MaxBufferedContentPerIdentity): waiting would not
// help, a streamed write would.
func (s *API) overShare(n int64) *apiError {
	return errorf(http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge,
		"the request body is %d bytes, over what one caller may hold at once on this lane (%d bytes with its decoded content: sema server --max-buffered-content-per-identity); send large content as a streamed write (POST /v1/devices/{id}/writes, sema fs put)",
		n, s.budget.perOwner)
}

// lengthRequired is 411: what was sent must announce its length.
func lengthRequired(what string, args ...any) *apiError {
	e := errorf(http.StatusLengthRequired, api.CodeLengthRequired, what, args...)
	e.Message += " must carry Content-Length"
	return e
}
