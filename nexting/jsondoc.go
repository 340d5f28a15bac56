package nexting

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the strict reader every decoder shares. jsontext (strict
// RFC 7493 mode) tokenizes the whole input once; it refuses invalid UTF-8,
// lone surrogate escapes and duplicate member names at every depth,
// comparing names after unescaping (so "\u0074" repeats "t"). On top of it
// the reader refuses a decoded U+0000 in any string or name, nesting deeper
// than MaxNesting below the top-level object and, for frames, insignificant
// whitespace. What it builds is a flat tree of nodes whose raw bytes alias
// the input; the message parsers navigate it afterwards, so nothing is
// acted on before the whole object has been read and checked.

// node is one JSON value of the input.
type node struct {
	kind  jsontext.Kind // '{', '[', '"', '0', 't', 'f' or 'n'
	name  []byte        // the member name, unescaped; nil for elements and the root
	raw   []byte        // the exact input bytes of the value
	str   []byte        // strings only: the unescaped contents
	first int32         // first child, or -1
	next  int32         // next sibling, or -1
	n     int32         // number of children
}

// doc is one parsed input. Docs are pooled: the nodes slice and the
// tokenizer are reused from one decode to the next.
type doc struct {
	data  []byte
	nodes []node
	buf   bytes.Buffer
	dec   *jsontext.Decoder
}

var docPool = sync.Pool{New: func() any {
	d := &doc{nodes: make([]node, 0, 32)}
	d.dec = jsontext.NewDecoder(&d.buf)
	return d
}}

func getDoc() *doc { return docPool.Get().(*doc) }

func putDoc(d *doc) {
	if cap(d.nodes) > 1024 {
		return // a rare huge input: let it go rather than pin its memory
	}
	clear(d.nodes) // drop references into the caller's input
	d.nodes = d.nodes[:0]
	d.data = nil
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	docPool.Put(d)
}

// parse reads data as exactly one JSON object. compact demands the
// canonical frame spelling: no whitespace between tokens.
func (d *doc) parse(data []byte, compact bool) *Error {
	d.data = data
	d.buf = *bytes.NewBuffer(data)
	d.dec.Reset(&d.buf)
	if d.dec.PeekKind() != '{' {
		if _, err := d.dec.ReadValue(); err != nil {
			return d.syntaxError(err)
		}
		return badMessage("", "not a JSON object")
	}
	if _, e := d.value(nil, 0); e != nil {
		return e
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return badMessage("", "data after the JSON object")
	}
	// Checked last so that JSON faults get their own, more telling detail.
	if compact && hasInsignificantSpace(data) {
		return badMessage("", "not compact JSON: whitespace between tokens")
	}
	return nil
}

// value reads one value at the given nesting level (the top-level object is
// level 0) and returns its node index.
func (d *doc) value(name []byte, level int) (int32, *Error) {
	idx := int32(len(d.nodes))
	k := d.dec.PeekKind()
	switch k {
	case '{', '[':
		if level > MaxNesting {
			return -1, badMessage("", "nested more than eight levels below the message")
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return -1, d.syntaxError(err)
		}
		start := d.dec.InputOffset() - 1
		d.nodes = append(d.nodes, node{kind: k, name: name, first: -1, next: -1})
		last := int32(-1)
		end := jsontext.Kind('}')
		if k == '[' {
			end = ']'
		}
		for d.dec.PeekKind() != end {
			var childName []byte
			if k == '{' {
				raw, e := d.scalar()
				if e != nil {
					return -1, e
				}
				if childName, e = unquoteChecked(raw); e != nil {
					return -1, e
				}
			}
			c, e := d.value(childName, level+1)
			if e != nil {
				return -1, e
			}
			if last < 0 {
				d.nodes[idx].first = c
			} else {
				d.nodes[last].next = c
			}
			last = c
			d.nodes[idx].n++
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return -1, d.syntaxError(err)
		}
		d.nodes[idx].raw = d.data[start:d.dec.InputOffset()]
		return idx, nil
	default:
		raw, e := d.scalar()
		if e != nil {
			return -1, e
		}
		n := node{kind: jsontext.Value(raw).Kind(), name: name, raw: raw, first: -1, next: -1}
		if n.kind == '"' {
			if n.str, e = unquoteChecked(raw); e != nil {
				return -1, e
			}
		}
		d.nodes = append(d.nodes, n)
		return idx, nil
	}
}

// scalar reads the next name or scalar value and returns its input bytes.
func (d *doc) scalar() ([]byte, *Error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, d.syntaxError(err)
	}
	end := int(d.dec.InputOffset())
	return d.data[end-len(v) : end], nil
}

// unquoteChecked returns a valid JSON string's contents, refusing a decoded
// U+0000 (profiles sheet: "A decoded U+0000 is invalid in every string";
// names are strings too). Without escapes it aliases raw.
func unquoteChecked(raw []byte) ([]byte, *Error) {
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		var err error
		if s, err = jsontext.AppendUnquote(nil, raw); err != nil {
			return nil, badMessage("", "invalid JSON string")
		}
	}
	if bytes.IndexByte(s, 0) >= 0 {
		return nil, badMessage("", "string contains U+0000")
	}
	return s, nil
}

// syntaxError maps a tokenizer error to bad_message with a detail that
// never quotes the input.
func (d *doc) syntaxError(err error) *Error {
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return badMessage("", "duplicate member name")
	case !utf8.Valid(d.data):
		return badMessage("", "invalid UTF-8")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badMessage("", "truncated JSON")
	}
	return badMessage("", "invalid JSON")
}

// hasInsignificantSpace reports whitespace outside string literals. Raw
// whitespace cannot occur inside a valid string except the space itself,
// which is skipped with the string.
func hasInsignificantSpace(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			return true
		}
	}
	return false
}

// member returns the child of object o named name, or -1.
func (d *doc) member(o int32, name string) int32 {
	if o < 0 || d.nodes[o].kind != '{' {
		return -1
	}
	for c := d.nodes[o].first; c >= 0; c = d.nodes[c].next {
		if string(d.nodes[c].name) == name {
			return c
		}
	}
	return -1
}
