package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the strict reader both decoders share. A frame is read in one
// pass into its top-level members (name and raw bytes, aliasing the input);
// the shape checks then look members up by name and read nested values from
// their raw bytes. The first shape error wins and names its field.

type member struct {
	name string
	raw  []byte
}

// object is one JSON object being shape-checked. All objects of one frame
// share one *shape, which keeps the first error.
type object struct {
	prefix  string
	members []member
	s       *shape
}

type shape struct{ err *FrameError }

func (s *shape) fail(field, format string, args ...any) {
	if s.err == nil {
		s.err = &FrameError{Reason: ReasonBadShape, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
}

func frameErr(r FrameRejectReason, format string, args ...any) *FrameError {
	return &FrameError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// readFrame reads data as one JSON object, returning its members, or the
// stage-1 refusal: not_json, not_object, or bad_shape for a duplicate name.
func readFrame(data []byte) (*object, *FrameError) {
	d := jsontext.NewDecoder(bytes.NewBuffer(data))
	tok, err := d.ReadToken()
	if err != nil {
		return nil, syntaxErr(data, err)
	}
	if tok.Kind() != '{' {
		if jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true)) {
			return nil, frameErr(ReasonNotObject, "the frame is JSON %s, not an object", kindName(tok.Kind()))
		}
		return nil, frameErr(ReasonNotJSON, "the frame is not valid JSON")
	}
	o := &object{s: &shape{}, members: make([]member, 0, 8)}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, syntaxErr(data, err)
		}
		name := tok.String() // before the next read voids tok
		v, err := d.ReadValue()
		if err != nil {
			return nil, syntaxErr(data, err)
		}
		end := int(d.InputOffset())
		o.members = append(o.members, member{name: name, raw: data[end-len(v) : end]})
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, syntaxErr(data, err)
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, frameErr(ReasonNotJSON, "the frame has data after its object")
	}
	return o, nil
}

// syntaxErr classifies a tokenizer error. A duplicate member name in
// otherwise valid JSON is bad_shape: the frame is JSON, but ambiguous.
func syntaxErr(data []byte, err error) *FrameError {
	if errors.Is(err, jsontext.ErrDuplicateName) && jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true)) {
		return frameErr(ReasonBadShape, "the frame repeats a member name")
	}
	return frameErr(ReasonNotJSON, "the frame is not valid JSON")
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '[':
		return "array"
	}
	return "value"
}

// children reads a syntactically valid raw object or array into its members
// (names are empty for array elements).
func children(raw []byte) []member {
	d := jsontext.NewDecoder(bytes.NewBuffer(raw))
	tok, err := d.ReadToken()
	if err != nil {
		return nil
	}
	isObject := tok.Kind() == '{'
	var out []member
	for d.PeekKind() != '}' && d.PeekKind() != ']' {
		var name string
		if isObject {
			t, err := d.ReadToken()
			if err != nil {
				return out
			}
			name = t.String()
		}
		v, err := d.ReadValue()
		if err != nil {
			return out
		}
		end := int(d.InputOffset())
		out = append(out, member{name: name, raw: raw[end-len(v) : end]})
	}
	return out
}

func (o *object) path(name string) string {
	if o.prefix == "" {
		return name
	}
	return o.prefix + "." + name
}

func (o *object) get(name string) ([]byte, bool) {
	for _, m := range o.members {
		if m.name == name {
			return m.raw, true
		}
	}
	return nil, false
}

// need returns a required member's raw value.
func (o *object) need(name string) ([]byte, bool) {
	raw, ok := o.get(name)
	if !ok {
		o.s.fail(o.path(name), "required field is missing")
	}
	return raw, ok
}

func (o *object) str(name string) string {
	raw, ok := o.need(name)
	if !ok {
		return ""
	}
	return o.asString(name, raw)
}

func (o *object) optStr(name string) (string, bool) {
	raw, ok := o.get(name)
	if !ok {
		return "", false
	}
	return o.asString(name, raw), true
}

func (o *object) nonEmpty(name string) string {
	v := o.str(name)
	if v == "" {
		o.s.fail(o.path(name), "must be a non-empty string")
	}
	return v
}

func (o *object) asString(name string, raw []byte) string {
	if raw[0] != '"' {
		o.s.fail(o.path(name), "must be a string, got %s", kindName(jsontext.Kind(raw[0])))
		return ""
	}
	return string(unquote(raw))
}

// unquote returns a valid raw JSON string's value; it aliases raw when the
// string has no escapes.
func unquote(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	v, _ := jsontext.AppendUnquote(nil, raw) // raw is valid: no error
	return v
}

func (o *object) boolean(name string) bool {
	raw, ok := o.need(name)
	if !ok {
		return false
	}
	return o.asBool(name, raw)
}

func (o *object) optBool(name string) (*bool, bool) {
	raw, ok := o.get(name)
	if !ok {
		return nil, false
	}
	v := o.asBool(name, raw)
	return &v, true
}

func (o *object) asBool(name string, raw []byte) bool {
	switch raw[0] {
	case 't':
		return true
	case 'f':
		return false
	}
	o.s.fail(o.path(name), "must be a boolean, got %s", kindName(jsontext.Kind(raw[0])))
	return false
}

// integer reads a required safe integer of at least min.
func (o *object) integer(name string, min int64) int64 {
	raw, ok := o.need(name)
	if !ok {
		return 0
	}
	return o.asInt(name, raw, min)
}

// intValue is integer for a field held in a Go int: on a 32-bit platform a
// safe integer beyond the int range is refused, never truncated.
func (o *object) intValue(name string, min int64) int {
	n := o.integer(name, min)
	if n < math.MinInt || n > math.MaxInt {
		o.s.fail(o.path(name), "%d does not fit this platform's int", n)
		return 0
	}
	return int(n)
}

func (o *object) optInteger(name string, min int64) (int64, bool) {
	raw, ok := o.get(name)
	if !ok {
		return 0, false
	}
	return o.asInt(name, raw, min), true
}

func (o *object) asInt(name string, raw []byte, min int64) int64 {
	n, err := safeInt(raw)
	if err != "" {
		o.s.fail(o.path(name), "%s", err)
		return 0
	}
	if n < min {
		o.s.fail(o.path(name), "must be at least %d, got %d", min, n)
		return 0
	}
	return n
}

// safeInt reads a JSON number that is an integer of magnitude at most
// 2^53−1, spelled without fraction or exponent (§2.2: "safe integers, no
// floats, no strings").
func safeInt(raw []byte) (int64, string) {
	c := raw[0]
	if c != '-' && (c < '0' || c > '9') {
		return 0, "must be an integer, got " + kindName(jsontext.Kind(c))
	}
	neg := c == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	var n int64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, "must be an integer, not a fraction or exponent form"
		}
		n = n*10 + int64(d-'0')
		if n > MaxSafeInteger {
			return 0, "must be a safe integer (magnitude at most 2^53-1)"
		}
	}
	if neg {
		n = -n
	}
	return n, ""
}

func (o *object) gen() Gen {
	raw, ok := o.need("gen")
	if !ok {
		return 0
	}
	if raw[0] != '"' {
		o.s.fail(o.path("gen"), "must be a canonical decimal string, got %s", kindName(jsontext.Kind(raw[0])))
		return 0
	}
	g, err := ParseGen(string(unquote(raw)))
	if err != nil {
		o.s.fail(o.path("gen"), "must be a canonical decimal string")
	}
	return g
}

func (o *object) strings(name string) []string {
	raw, ok := o.need(name)
	if !ok {
		return nil
	}
	if raw[0] != '[' {
		o.s.fail(o.path(name), "must be an array of strings, got %s", kindName(jsontext.Kind(raw[0])))
		return nil
	}
	elems := children(raw)
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		if e.raw[0] != '"' {
			o.s.fail(fmt.Sprintf("%s[%d]", o.path(name), i), "must be a string, got %s", kindName(jsontext.Kind(e.raw[0])))
			return nil
		}
		out = append(out, string(unquote(e.raw)))
	}
	return out
}

// obj reads a required nested object.
func (o *object) obj(name string) *object {
	raw, ok := o.need(name)
	if !ok {
		return nil
	}
	return o.asObj(o.path(name), raw)
}

func (o *object) optObj(name string) *object {
	raw, ok := o.get(name)
	if !ok {
		return nil
	}
	return o.asObj(o.path(name), raw)
}

func (o *object) asObj(path string, raw []byte) *object {
	if raw[0] != '{' {
		o.s.fail(path, "must be an object, got %s", kindName(jsontext.Kind(raw[0])))
		return nil
	}
	return &object{prefix: path, members: children(raw), s: o.s}
}

// b64 reads a member as canonical standard base64 (§4 Encoding).
func (o *object) b64(name string, raw []byte) []byte {
	if raw[0] != '"' {
		o.s.fail(o.path(name), "must be a base64 string, got %s", kindName(jsontext.Kind(raw[0])))
		return nil
	}
	data, err := decodeCanonicalBase64(unquote(raw))
	if err != nil {
		o.s.fail(o.path(name), "%v", err)
		return nil
	}
	return data
}

// b64Keeping is b64 that also returns a copy of the canonical text (see
// Chunk.DataB64); both are non-nil once the member is accepted.
func (o *object) b64Keeping(name string, raw []byte) (data, text []byte, pooled *chunkBuf) {
	if raw[0] != '"' {
		o.s.fail(o.path(name), "must be a base64 string, got %s", kindName(jsontext.Kind(raw[0])))
		return nil, nil, nil
	}
	data, text, pooled, err := decodeCanonicalBase64Keeping(unquote(raw))
	if err != nil {
		o.s.fail(o.path(name), "%v", err)
		return nil, nil, nil
	}
	return data, text, pooled
}
