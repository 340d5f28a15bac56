package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sema-agent/sema/lane"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// postWrite is POST /v1/devices/{id}/writes: a write-family instruction
// whose content is the raw request body, streamed to the device as payload
// parts as it arrives (§3.4), never held whole. The instruction is in the
// query (parseWriteQuery); Content-Length is required and is the declared
// contentLen. Refusals before anything is queued are the JSON errors of
// POST /v1/devices/{id}/instructions (400, 403, 404, 411, 503); otherwise
// the answer is its NDJSON event stream (streamCall).
//
// The body is read only by the call's send goroutine, once the call is
// committed; a call that is never sent does not read it. The handler does
// not return while that goroutine may still read the body: once the call
// has settled (or the client went away) it makes any pending read fail and
// waits for the lane to let go of the content.
func (s *API) postWrite(w http.ResponseWriter, r *http.Request) {
	received := s.cfg.Clock.Now()
	q, aerr := parseWriteQuery(r.URL.RawQuery)
	if aerr == nil && r.ContentLength < 0 {
		aerr = lengthRequired("a streamed write's body")
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	deviceID, caller := r.PathValue("id"), callerOf(r.Context())
	if aerr := s.ownedDevice(r, deviceID, caller.ID); aerr != nil {
		writeError(w, aerr)
		return
	}
	hold, ok := s.budget.reserve(caller.ID, s.uploadReservation())
	if !ok {
		s.busy(w, r, 0)
		return
	}
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// The first read sends "100 Continue"; it must come before the
		// answer's header, after which Go's server never sends it (and
		// curl would wait a second before sending the body).
		r.Body.Read(nil)
	}
	body := &countingBody{r: s.pacedBody(w, r, r.ContentLength), want: r.ContentLength}
	if r.Header.Get(api.HeaderHalfDuplex) == "1" {
		held := &heldAnswer{w: w, held: true}
		body.end = held.release
		defer held.release() // the call settled first: its outcome is the answer
		w = held
	}
	in := lane.Instruction{
		Kind: q.kind, Args: q.args, Timeout: time.Duration(q.timeoutMs) * time.Millisecond, RootSessionID: q.rootSessionID,
		ContentStream: body, ContentLen: r.ContentLength, ContentSHA256: q.sha256,
	}
	call := s.dispatchHTTP(w, r, deviceID, received, in, hold.release)
	if call == nil {
		return
	}
	rc := http.NewResponseController(w)
	// HTTP/1.1: answer (the accepted line) while the body is still being
	// read. HTTP/2 is full duplex already (ErrNotSupported).
	rc.EnableFullDuplex()
	s.streamCall(w, r, call)
	select {
	case <-call.ContentReleased():
	default:
		rc.SetReadDeadline(time.Now()) // a read still waiting for the client fails now
		<-call.ContentReleased()
	}
	if body.n < r.ContentLength {
		// Unread, or read in part: give up on the rest now (the connection
		// closes after the answer). Left to the server, a full-duplex
		// request's body is drained after the handler, and a drain that
		// reaches EOF then races the next request's read.
		rc.SetReadDeadline(time.Now())
		r.Body.Close()
	}
}

// countingBody counts what the lane has read of a request body (read by
// the send goroutine; n is read after ContentReleased), and calls end, if
// set, once it has read want bytes.
type countingBody struct {
	r    io.Reader
	n    int64
	want int64
	end  func()
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n >= b.want && b.end != nil {
		b.end()
		b.end = nil
	}
	return n, err
}

// heldAnswer holds a streamed write's answer (its accepted line, its
// status) until the lane has read the whole body, or until the instruction
// settled, whichever comes first. It is for a caller behind a proxy that
// stops sending a request's body once the answer has begun (nginx does):
// the request says so with Sema-Half-Duplex: 1. Its writes come from the
// handler, its release from the goroutine reading the body: mu orders them.
type heldAnswer struct {
	w      http.ResponseWriter
	mu     sync.Mutex
	held   bool
	status int
	buf    []byte
}

func (h *heldAnswer) Header() http.Header { return h.w.Header() }

// Unwrap lets http.ResponseController reach the connection.
func (h *heldAnswer) Unwrap() http.ResponseWriter { return h.w }

func (h *heldAnswer) WriteHeader(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.status = status
		return
	}
	h.w.WriteHeader(status)
}

func (h *heldAnswer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.w.Write(p)
}

func (h *heldAnswer) Flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		http.NewResponseController(h.w).Flush()
	}
}

// release sends what was held and passes the rest through.
func (h *heldAnswer) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		return
	}
	h.held = false
	if h.status != 0 {
		h.w.WriteHeader(h.status)
	}
	h.w.Write(h.buf)
	h.buf = nil
	http.NewResponseController(h.w).Flush()
}

// uploadReservation is what a streamed upload holds in the buffered-content
// budget: its one part buffer and the frame that carries it (base64 and
// the frame's fields), so that uploads, however many and however large,
// stay within Config.MaxBufferedContent.
func (s *API) uploadReservation() int64 {
	part := s.cfg.PayloadPartBytes
	return int64(part + b64.EncodedLen(part) + 1024)
}

// ownedDevice refuses a device the caller does not own (404, as for one
// that does not exist), before anything of the body is read.
func (s *API) ownedDevice(r *http.Request, deviceID, owner string) *apiError {
	_, err := s.core.OwnedDevice(r.Context(), deviceID, owner)
	switch {
	case errors.Is(err, lane.ErrUnknownDevice):
		return deviceNotFound(deviceID)
	case err != nil:
		e := errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "the device registry is unavailable; retry later")
		e.retryAfter = busyRetryAfter
		return e
	}
	return nil
}

func deviceNotFound(id string) *apiError {
	return errorf(http.StatusNotFound, api.CodeDeviceNotFound, "you have no device %q", clip(id))
}

// writeQuery is the instruction of a streamed write, from its query.
type writeQuery struct {
	kind          protocol.InstructionKind
	args          protocol.WriteArgs // contentLen and sha256 are placeholders; lane.BuildFrame fills them
	timeoutMs     int64
	sha256        protocol.Digest
	rootSessionID string
}

// maxTimeoutMs is the longest timeoutMs a time.Duration holds (292 years).
const maxTimeoutMs = int64(math.MaxInt64 / time.Millisecond)

// uploadQueryKeys is the closed set of a streamed write's query.
var uploadQueryKeys = []string{"kind", "path", "timeoutMs", "sha256", "expect", "rootSessionId"}

// parseWriteQuery reads kind (default writeFile), path, timeoutMs, sha256,
// expect (writeFileGuarded only) and rootSessionId from a raw query. Each
// key at most once, no other key; errors name the key, and never echo a
// value but the kind.
func parseWriteQuery(raw string) (writeQuery, *apiError) {
	var q writeQuery
	shape := func(format string, args ...any) (writeQuery, *apiError) {
		return q, errorf(http.StatusBadRequest, api.CodeBodyShape, format, args...)
	}
	field := func(format string, args ...any) (writeQuery, *apiError) {
		return q, errorf(http.StatusBadRequest, api.CodeFieldInvalid, format, args...)
	}
	values, err := parseQuery(raw)
	if err != nil {
		return shape("the query string is malformed: %v", err)
	}
	for key, v := range values {
		switch {
		case !slices.Contains(uploadQueryKeys, key):
			return shape("unknown query parameter %q (a streamed write takes %s)", clip(key), strings.Join(uploadQueryKeys, ", "))
		case len(v) > 1:
			return shape("the query parameter %q is given %d times", key, len(v))
		}
	}
	for _, key := range []string{"path", "timeoutMs", "sha256"} {
		if _, ok := values[key]; !ok {
			return shape("missing required query parameter %q", key)
		}
	}
	get := func(key string) (string, bool) {
		v, ok := values[key]
		if !ok {
			return "", false
		}
		return v[0], true
	}
	q.kind = protocol.KindWriteFile
	if k, ok := get("kind"); ok {
		q.kind = protocol.InstructionKind(k)
		if !q.kind.IsWrite() {
			return field("kind %q is not of the write family (writeFile, writeFileExclusive, writeFileGuarded, appendFile)", clip(k))
		}
	}
	path, _ := get("path")
	if !protocol.ValidAbsPath(path) {
		return field("path must be an absolute, normalized path")
	}
	ms, _ := get("timeoutMs")
	if q.timeoutMs, err = parsePositive(ms); err != nil || q.timeoutMs > maxTimeoutMs {
		return field("timeoutMs must be a positive integer (at most %d)", maxTimeoutMs)
	}
	sum, _ := get("sha256")
	if q.sha256, err = parseLowerDigest(sum); err != nil {
		return field("sha256 must be the body's SHA-256 as 64 lower-case hex characters")
	}
	q.rootSessionID, _ = get("rootSessionId")
	expect, hasExpect := get("expect")
	switch {
	case hasExpect && q.kind != protocol.KindWriteFileGuarded:
		return field("expect is only for writeFileGuarded")
	case !hasExpect && q.kind == protocol.KindWriteFileGuarded:
		return field("writeFileGuarded needs expect (a JSON object)")
	}
	args, aerr := uploadArgs(q.kind, path, expect, hasExpect)
	if aerr != nil {
		return q, aerr
	}
	q.args = args
	return q, nil
}

// uploadArgs makes the write's args through the shared args decoder, so the
// query is held to exactly the rules of a JSON body's args. expect is
// checked to be one JSON object before it is put in.
func uploadArgs(kind protocol.InstructionKind, path, expect string, hasExpect bool) (protocol.WriteArgs, *apiError) {
	field := func(format string, args ...any) (protocol.WriteArgs, *apiError) {
		return protocol.WriteArgs{}, errorf(http.StatusBadRequest, api.CodeFieldInvalid, format, args...)
	}
	if !utf8.ValidString(path) {
		return field("path must be valid UTF-8")
	}
	if hasExpect && (!jsontext.Value(expect).IsValid() || jsontext.Value(expect).Kind() != '{') {
		return field("expect must be a JSON object (writeFileGuarded's expect, §3.5)")
	}
	quoted, _ := json.Marshal(path)
	raw := `{"path":` + string(quoted) + `,"contentLen":0,"sha256":"` + strings.Repeat("0", 64) + `"`
	if hasExpect {
		raw += `,"expect":` + expect
	}
	args, err := protocol.DecodeArgs(kind, []byte(raw+"}"))
	if err != nil {
		// "args.expect.canonicalPath: ..." names the query's expect.canonicalPath.
		return field("%s", strings.TrimPrefix(err.Error(), "args."))
	}
	return args.(protocol.WriteArgs), nil
}

// parseQuery splits a raw query into its values; a bad escape or a
// semicolon is an error (url.ParseQuery).
func parseQuery(raw string) (url.Values, error) { return url.ParseQuery(raw) }

// parsePositive reads a positive safe integer in canonical decimal: digits
// only, no sign, no leading zero.
func parsePositive(s string) (int64, error) {
	if s == "" || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errNotPositive
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > protocol.MaxSafeInteger {
		return 0, errNotPositive
	}
	return n, nil
}

var errNotPositive = errors.New("not a positive integer")

// parseLowerDigest reads a SHA-256 as 64 lower-case hex characters.
func parseLowerDigest(s string) (protocol.Digest, error) {
	if strings.ToLower(s) != s {
		return protocol.Digest{}, errors.New("not lower case")
	}
	return protocol.ParseDigest(s)
}
