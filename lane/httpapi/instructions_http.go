package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// instructionRequest is the body of POST /v1/devices/{id}/instructions.
type instructionRequest struct {
	Kind          protocol.InstructionKind
	Args          jsontext.Value
	Cwd           string
	ShellEnv      map[string]string
	TimeoutMs     int64
	Content       []byte
	RootSessionID string
}

// parseInstructionRequest reads the closed body {"kind", "args", "cwd"?,
// "shellEnv"?, "timeoutMs", "contentB64"?, "rootSessionId"?}; errors name
// the field. A write-family kind needs a body that carried Content-Length
// (sized), else it is 411 (see instruction_body.go).
//
// The body may be a hundred megabytes of contentB64, so nothing of it is
// copied: members are slices of body, contentB64 is decoded from where it
// lies, and the only allocation in proportion to the body is the decoded
// content. Nothing returned aliases body (args is cloned).
func parseInstructionRequest(body []byte, sized bool) (instructionRequest, *apiError) {
	var req instructionRequest
	shape := func(format string, args ...any) *apiError {
		return errorf(http.StatusBadRequest, api.CodeBodyShape, format, args...)
	}
	field := func(format string, args ...any) *apiError {
		return errorf(http.StatusBadRequest, api.CodeFieldInvalid, format, args...)
	}
	if !jsontext.Value(body).IsValid() {
		if jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true)) {
			return req, shape("the request body repeats a key")
		}
		return req, errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body is not valid JSON")
	}
	if jsontext.Value(body).Kind() != '{' {
		return req, shape("the request body must be a JSON object")
	}
	members := objectMembers(body)
	for key := range members {
		switch key {
		case "kind", "args", "cwd", "shellEnv", "timeoutMs", "contentB64", "rootSessionId":
		default:
			return req, shape("unknown key %q", clip(key))
		}
	}
	for _, key := range []string{"kind", "args", "timeoutMs"} {
		if _, ok := members[key]; !ok {
			return req, shape("missing required key %q", key)
		}
	}
	str := func(key string) (string, *apiError) {
		v := members[key]
		if v.Kind() != '"' {
			return "", field("%s must be a string", key)
		}
		s, _ := jsontext.AppendUnquote(nil, v)
		return string(s), nil
	}
	kind, aerr := str("kind")
	if aerr != nil {
		return req, aerr
	}
	req.Kind = protocol.InstructionKind(kind)
	if !req.Kind.Valid() {
		return req, field("kind %q is not an instruction kind", clip(kind))
	}
	if req.Kind.IsWrite() && !sized {
		return req, lengthRequired("a %s body", req.Kind)
	}
	if members["args"].Kind() != '{' {
		return req, field("args must be an object")
	}
	req.Args = members["args"].Clone()
	if err := json.Unmarshal(members["timeoutMs"], &req.TimeoutMs); err != nil || req.TimeoutMs <= 0 ||
		strings.ContainsAny(string(members["timeoutMs"]), ".eE") || req.TimeoutMs > protocol.MaxSafeInteger {
		return req, field("timeoutMs must be a positive integer")
	}
	if _, ok := members["cwd"]; ok {
		if req.Cwd, aerr = str("cwd"); aerr != nil {
			return req, aerr
		}
		if !protocol.ValidAbsPath(req.Cwd) {
			return req, field("cwd must be an absolute, normalized path")
		}
	}
	if _, ok := members["rootSessionId"]; ok {
		if req.RootSessionID, aerr = str("rootSessionId"); aerr != nil {
			return req, aerr
		}
	}
	if v, ok := members["shellEnv"]; ok {
		if err := json.Unmarshal(v, &req.ShellEnv); err != nil || v.Kind() != '{' {
			return req, field("shellEnv must be an object of strings")
		}
	}
	if v, ok := members["contentB64"]; ok {
		if v.Kind() != '"' {
			return req, field("contentB64 must be a string")
		}
		if !req.Kind.IsWrite() {
			return req, field("contentB64 is only for the write family")
		}
		content, err := decodeContentB64(v)
		if err != nil {
			return req, field("contentB64 must be canonical standard base64")
		}
		req.Content = content
		if req.Content == nil {
			req.Content = []byte{}
		}
	}
	return req, nil
}

// objectMembers splits a valid JSON object into its members, each value a
// slice of body (no copy: the decoder reads a bytes.Buffer in place).
func objectMembers(body []byte) map[string]jsontext.Value {
	members := map[string]jsontext.Value{}
	d := jsontext.NewDecoder(bytes.NewBuffer(body))
	d.ReadToken()
	for d.PeekKind() != '}' {
		name, _ := d.ReadToken()
		key := name.String()
		v, _ := d.ReadValue()
		end := d.InputOffset()
		members[key] = jsontext.Value(body[end-int64(len(v)) : end])
	}
	return members
}

// decodeContentB64 decodes a JSON string of base64 without unquoting it
// into a copy: base64 needs no escapes, and the only escapes that can
// stand for base64 characters (\/ and \u00XX) are undone in place, in the
// body the string lies in, which the lane owns.
func decodeContentB64(v jsontext.Value) ([]byte, error) {
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		var ok bool
		if raw, ok = unescapeASCIIInPlace(raw); !ok {
			return nil, errNotBase64
		}
	}
	return protocol.DecodeCanonicalBase64Bytes(raw)
}

var errNotBase64 = errors.New("not base64")

// unescapeASCIIInPlace undoes the JSON escapes of s that stand for a
// printable ASCII character, writing over s (the result is never longer).
// Any other escape cannot be part of base64: false.
func unescapeASCIIInPlace(s []byte) ([]byte, bool) {
	out := s[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' {
			switch {
			case i+1 < len(s) && s[i+1] == '/':
				c, i = '/', i+1
			case i+5 < len(s) && s[i+1] == 'u':
				n, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 16)
				if err != nil || n < 0x20 || n >= 0x7f {
					return nil, false
				}
				c, i = byte(n), i+5
			default:
				return nil, false
			}
		}
		out = append(out, c)
	}
	return out, true
}

// instructionArgs decodes the args for the kind. For the write family the
// server computes contentLen and sha256, so they may not be given.
func instructionArgs(req instructionRequest) (protocol.Args, *apiError) {
	raw := []byte(req.Args)
	if req.Kind.IsWrite() {
		var keys map[string]json.RawMessage
		json.Unmarshal(raw, &keys)
		for _, k := range []string{"contentLen", "sha256"} {
			if _, ok := keys[k]; ok {
				return nil, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "args.%s is computed by the server from contentB64", k)
			}
		}
		// Placeholders that pass the shared args check; lane.BuildFrame replaces them.
		// Only the object's own closing brace goes: args may end in a nested
		// object (writeFileGuarded's expect).
		trimmed := bytes.TrimSuffix(bytes.TrimSpace(raw), []byte("}"))
		sep := ","
		if len(bytes.TrimSpace(trimmed)) == 1 { // just "{"
			sep = ""
		}
		raw = append(append([]byte{}, trimmed...), sep+`"contentLen":0,"sha256":"`+strings.Repeat("0", 64)+`"}`...)
	}
	args, err := protocol.DecodeArgs(req.Kind, raw)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "%v", err)
	}
	return args, nil
}

// postInstruction is POST /v1/devices/{id}/instructions: refusals before
// anything is queued are 4xx (or 503 service.busy while the content budget
// is full); otherwise a 200 NDJSON stream of events, flushed as they
// happen, ending with the outcome.
func (s *API) postInstruction(w http.ResponseWriter, r *http.Request) {
	probe.Mark(probe.LaneAuthenticated)
	received := s.cfg.Clock.Now()
	// The device must be the caller's before a byte of the body is read or
	// held: a caller with no device cannot hold the budget.
	if aerr := s.ownedDevice(r, r.PathValue("id"), callerOf(r.Context()).ID); aerr != nil {
		writeError(w, aerr)
		return
	}
	in, hold, aerr := s.readInstruction(w, r)
	probe.Mark(probe.LaneParsed)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// From here dispatch owns the reservation: it releases it once the lane
	// has finished with the content, on every path.
	if call := s.dispatchHTTP(w, r, r.PathValue("id"), received, in, hold.release); call != nil {
		s.streamCall(w, r, call)
	}
}

// dispatchHTTP dispatches for the request's caller, who sent it at
// received; when it cannot, it answers the refusal (404, 409
// session.device_mismatch or session.limit_reached, 400, 503) and returns
// nil. release is
// dispatch's contentDone. The instruction's history row names the caller,
// the key and the address (a forwarded request's is the caller's, see
// verifyHop): it is written here, on the replica that holds the device.
func (s *API) dispatchHTTP(w http.ResponseWriter, r *http.Request, deviceID string, received time.Time, in lane.Instruction, release func()) *lane.Call {
	caller := callerOf(r.Context())
	from := lane.Requester{IdentityID: caller.ID, APIKeyID: caller.APIKeyID, RemoteAddr: lane.RemoteAddr(r), ReceivedAt: received}
	call, err := s.core.DispatchFor(r.Context(), deviceID, from, in, release)
	var (
		invalid  *lane.InvalidInstructionError
		mismatch *lane.SessionMismatchError
		limit    *lane.SessionLimitError
	)
	switch {
	case errors.Is(err, lane.ErrUnknownDevice):
		writeError(w, deviceNotFound(deviceID))
		return nil
	case errors.As(err, &mismatch):
		writeError(w, errorf(http.StatusConflict, api.CodeSessionDeviceMismatch, "%s", mismatch.Error()))
		return nil
	case errors.As(err, &limit):
		writeError(w, sessionLimit(limit))
		return nil
	case errors.As(err, &invalid):
		writeError(w, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "%s", invalid.Detail))
		return nil
	case err != nil:
		s.unavailable(w, r, "dispatch", err)
		return nil
	}
	return call
}

// readInstruction admits, reads and parses the body. On success the
// returned reservation holds the decoded content (nothing for a non-write);
// on an error nothing is held.
func (s *API) readInstruction(w http.ResponseWriter, r *http.Request) (lane.Instruction, *reservation, *apiError) {
	body, hold, aerr := s.readInstructionBody(w, r)
	if aerr != nil {
		return lane.Instruction{}, nil, aerr
	}
	req, aerr := parseInstructionRequest(body, r.ContentLength >= 0) // only the decoded content outlives this
	var args protocol.Args
	if aerr == nil {
		args, aerr = instructionArgs(req)
	}
	if aerr != nil {
		hold.release()
		return lane.Instruction{}, nil, aerr
	}
	if req.Kind.IsWrite() && req.Content == nil {
		req.Content = []byte{}
	}
	hold.shrinkTo(int64(len(req.Content)))
	return lane.Instruction{
		Kind: req.Kind, Args: args, Cwd: req.Cwd, ShellEnv: req.ShellEnv,
		Timeout: time.Duration(req.TimeoutMs) * time.Millisecond, Content: req.Content, RootSessionID: req.RootSessionID,
	}, hold, nil
}

// cancelInstruction is POST /v1/instructions/{id}/cancel: 202, idempotent;
// 404 for an id the caller does not own or the lane does not know.
func (s *API) cancelInstruction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	caller := callerOf(r.Context())
	var known bool
	switch s.core.CancelAs(r.Context(), caller.ID, id) {
	case lane.CancelLive, lane.CancelSettled:
		known = true // cancelled, or settled already: cancelling is a no-op
	case lane.CancelUnknown:
		known = s.cancelElsewhere(r, id) // another replica dispatched it, and cancels it
	}
	if !known {
		writeError(w, errorf(http.StatusNotFound, api.CodeInstructionNotFound, "no instruction %q of yours is known to this lane", clip(id)))
		return
	}
	writeJSON(w, http.StatusAccepted, api.CancelResponse{InstructionID: id})
}
