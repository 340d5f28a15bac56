package nexting

import (
	"bytes"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Vendor is Device Info's optional, inert vendor section (profiles sheet:
// "Optional vendor section, inert"). It is shown only in a vendor area and
// can never override a system-owned field.
type Vendor struct {
	Namespace string // reverse-domain, at most 128 bytes
	Facts     []VendorFact
}

// VendorFact is one displayed fact.
type VendorFact struct {
	Key     string // unique, 1–32 ASCII: [A-Za-z0-9][A-Za-z0-9._-]{0,31}
	Label   string // 1–64 printable bytes, inert
	Value   string // 1–128 printable bytes, inert; or a canonical integer's digits
	Integer bool   // Value was sent as a JSON integer
}

const (
	maxVendorBytes     = 1024
	maxVendorNamespace = 128
	maxVendorFacts     = 16
	maxFactKey         = 32
	maxFactValue       = 128
)

// parseVendor reads the vendor member v of an already validated Device
// Info. Its errors never reject Device Info: the caller drops the section.
func parseVendor(d *doc, v int32) (*Vendor, error) {
	raw := d.nodes[v].raw
	if bytes.ContainsAny(raw, " \t\r\n") { // measure the compact encoding
		c := jsontext.Value(bytes.Clone(raw))
		if err := c.Compact(); err == nil {
			raw = c
		}
	}
	if len(raw) > maxVendorBytes {
		return nil, badMessage("vendor", "must be at most 1024 encoded bytes")
	}
	r := &reader{d: d}
	p := top.field("vendor")
	if !r.objectAt(v, p) {
		return nil, r.err
	}
	ven := &Vendor{Namespace: r.str(v, p, "namespace")}
	first, n := r.array(v, p, "facts")
	if r.err != nil {
		return nil, r.err
	}
	if n < 1 || n > maxVendorFacts {
		return nil, badMessage("vendor.facts", "must have 1-16 entries")
	}
	if !validNamespace(ven.Namespace) {
		return nil, badMessage("vendor.namespace", "must be a reverse-domain name of at most 128 bytes")
	}
	for i, c := 0, first; c >= 0; i, c = i+1, r.next(c) {
		fp := p.field("facts").elem(i)
		if !r.objectAt(c, fp) {
			return nil, r.err
		}
		f := VendorFact{Key: r.str(c, fp, "key"), Label: r.str(c, fp, "label")}
		val := r.need(c, fp, "value")
		if r.err != nil {
			return nil, r.err
		}
		switch r.node(val).kind {
		case '"':
			f.Value = string(r.node(val).str)
		case '0':
			iv := r.int64At(val, fp.field("value"))
			if r.err == nil && (iv > maxSafeInteger || iv < -maxSafeInteger) {
				r.fail(fp.field("value"), "integer out of range")
			}
			f.Value, f.Integer = string(r.node(val).raw), true
		default:
			r.fail(fp.field("value"), "must be a string or an integer")
		}
		if r.err != nil {
			return nil, r.err
		}
		if e := checkFact(i, f, ven.Facts); e != nil {
			return nil, e
		}
		ven.Facts = append(ven.Facts, f)
	}
	return ven, nil
}

func checkFact(i int, f VendorFact, prev []VendorFact) *Error {
	if !validFactKey(f.Key) {
		return badMessage(elemField("vendor.facts", i, "key"), "must be 1-32 ASCII characters of [A-Za-z0-9][A-Za-z0-9._-]*")
	}
	for _, p := range prev {
		if p.Key == f.Key {
			return badMessage(elemField("vendor.facts", i, "key"), "duplicate key")
		}
	}
	if e := checkInert(elemField("vendor.facts", i, "label"), f.Label, 64); e != nil {
		return e
	}
	if !f.Integer {
		return checkInert(elemField("vendor.facts", i, "value"), f.Value, maxFactValue)
	}
	return nil
}

// checkInert: a printable descriptor that cannot be markup, a script or a
// link. Refused: '<' and '>' (HTML, scripts), the Markdown characters
// ` * _ # [ ] ( ), and "://", "www.", "javascript:", "data:", "vbscript:",
// "mailto:" in any letter case (URLs). This is a superset of the
// published reference's pattern.
func checkInert(field, s string, max int) *Error {
	if e := checkDescriptor(field, s, max); e != nil {
		return e
	}
	if strings.ContainsAny(s, "<>`*_#[]()") {
		return badMessage(field, "must not contain markup characters")
	}
	l := strings.ToLower(s)
	for _, u := range []string{"://", "www.", "javascript:", "data:", "vbscript:", "mailto:"} {
		if strings.Contains(l, u) {
			return badMessage(field, "must not contain a link")
		}
	}
	return nil
}

func validFactKey(k string) bool { return len(k) <= maxFactKey && validConfigKey(k) }

// validNamespace: a reverse-domain name of at most 128 bytes — at least two
// dot-separated labels, each 1–63 of [a-z0-9-] starting with [a-z0-9].
// (The published regular expression also lets a middle label be empty or
// start with '-'; those are refused here.)
func validNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > maxVendorNamespace {
		return false
	}
	labels := strings.Split(ns, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
