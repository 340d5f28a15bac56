package nexting

import (
	"math"
	"strconv"
	"strings"
)

// This file reads typed fields from a parsed doc. A reader keeps the first
// error (with the field's path) and later reads become no-ops returning
// zero values, so a parser reads every field in a straight line and checks
// r.err once.

// path locates a field for error messages; it is a value and costs nothing
// until String is called on failure. Known messages nest at most four
// segments deep (keys[0].rgb[2]).
type path struct {
	n    int
	segs [4]pathSeg
}

type pathSeg struct {
	name  string
	index int // element index when name == ""
}

func (p path) field(name string) path {
	if p.n < len(p.segs) {
		p.segs[p.n] = pathSeg{name: name}
		p.n++
	}
	return p
}

func (p path) elem(i int) path {
	if p.n < len(p.segs) {
		p.segs[p.n] = pathSeg{index: i}
		p.n++
	}
	return p
}

func (p path) String() string {
	var b strings.Builder
	for i := 0; i < p.n; i++ {
		s := p.segs[i]
		if s.name == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
	}
	return b.String()
}

type reader struct {
	d    *doc
	root int32
	err  *Error
}

var top path

func (r *reader) fail(p path, detail string) {
	if r.err == nil {
		r.err = badMessage(p.String(), detail)
	}
}

func (r *reader) node(n int32) *node { return &r.d.nodes[n] }

// get returns the member name of object o, or -1 when it is absent.
func (r *reader) get(o int32, name string) int32 { return r.d.member(o, name) }

// need returns the member name of object o and fails when it is absent.
func (r *reader) need(o int32, p path, name string) int32 {
	if r.err != nil || o < 0 {
		return -1
	}
	n := r.d.member(o, name)
	if n < 0 {
		r.fail(p.field(name), "required field is missing")
	}
	return n
}

// closed fails when object o has a member not in allowed (the interaction
// profiles' messages are closed: additionalProperties false in the
// published schema, and the vectors reject unknown fields).
func (r *reader) closed(o int32, p path, allowed []string) {
	if r.err != nil || o < 0 {
		return
	}
	for c := r.node(o).first; c >= 0; c = r.node(c).next {
		if !contains(allowed, r.node(c).name) {
			r.fail(p, "unknown field (this message allows no extra fields)")
			return
		}
	}
}

func contains(set []string, name []byte) bool {
	for _, s := range set {
		if s == string(name) {
			return true
		}
	}
	return false
}

// isKind fails unless node n (at p) has kind k.
func (r *reader) isKind(n int32, p path, k byte, what string) bool {
	if r.err != nil || n < 0 {
		return false
	}
	if byte(r.node(n).kind) != k {
		r.fail(p, "must be "+what)
		return false
	}
	return true
}

// strAt reads node n as a string.
func (r *reader) strAt(n int32, p path) string {
	if !r.isKind(n, p, '"', "a string") {
		return ""
	}
	return string(r.node(n).str)
}

// str reads a required string member.
func (r *reader) str(o int32, p path, name string) string {
	return r.strAt(r.need(o, p, name), p.field(name))
}

// optStr reads an optional string member whose minimum length is 1, so
// that "" can stand for absent in Go: a present empty string fails.
func (r *reader) optStr(o int32, p path, name string) string {
	n := r.get(o, name)
	if n < 0 || r.err != nil {
		return ""
	}
	s := r.strAt(n, p.field(name))
	if r.err == nil && s == "" {
		r.fail(p.field(name), "must not be empty when present")
	}
	return s
}

// boolean reads a required boolean member.
func (r *reader) boolean(o int32, p path, name string) bool {
	n := r.need(o, p, name)
	if r.err != nil {
		return false
	}
	switch r.node(n).kind {
	case 't':
		return true
	case 'f':
		return false
	}
	r.fail(p.field(name), "must be a boolean")
	return false
}

// int64At reads node n as a canonical integer (profiles sheet: fractions
// and exponents are invalid for every integer field): -?(0|[1-9][0-9]*),
// "-0" refused, magnitude within int64.
func (r *reader) int64At(n int32, p path) int64 {
	if !r.isKind(n, p, '0', "an integer") {
		return 0
	}
	v, msg := parseCanonicalInt(r.node(n).raw)
	if msg != "" {
		r.fail(p, msg)
	}
	return v
}

func parseCanonicalInt(raw []byte) (int64, string) {
	neg := raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 {
		return 0, "must be an integer"
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, "must be a canonical integer (no fraction or exponent)"
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, "integer out of range"
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u == 0:
		return 0, "must be a canonical integer (-0 is not)"
	case !neg && u > math.MaxInt64, neg && u > math.MaxInt64:
		return 0, "integer out of range"
	case neg:
		return -int64(u), ""
	}
	return int64(u), ""
}

// intAt reads node n as an integer bounded to int32's range; exact bounds
// are the validator's job. Wider values fail here, before they could be
// narrowed on a 32-bit platform.
func (r *reader) intAt(n int32, p path) int {
	v := r.int64At(n, p)
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(p, "integer out of range")
		return 0
	}
	return int(v)
}

func (r *reader) int(o int32, p path, name string) int {
	return r.intAt(r.need(o, p, name), p.field(name))
}

// u32 reads a required canonical unsigned 32-bit integer (rev, seq).
func (r *reader) u32(o int32, p path, name string) uint32 {
	v := r.int64At(r.need(o, p, name), p.field(name))
	if v < 0 || v > math.MaxUint32 {
		r.fail(p.field(name), "must be an unsigned 32-bit integer")
		return 0
	}
	return uint32(v)
}

// u64At reads node n as a non-negative integer; the validator bounds it.
func (r *reader) u64At(n int32, p path) uint64 {
	v := r.int64At(n, p)
	if v < 0 {
		r.fail(p, "must not be negative")
		return 0
	}
	return uint64(v)
}

// array reads a required array member and returns its first element and
// length.
func (r *reader) array(o int32, p path, name string) (first int32, n int) {
	a := r.need(o, p, name)
	if !r.isKind(a, p.field(name), '[', "an array") {
		return -1, 0
	}
	return r.node(a).first, int(r.node(a).n)
}

// objectAt checks that node n is an object.
func (r *reader) objectAt(n int32, p path) bool { return r.isKind(n, p, '{', "an object") }

func (r *reader) next(n int32) int32 { return r.node(n).next }
