package nexting

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Encode returns m's canonical frame: compact JSON in the spec's field order
// ("v" and "t" first, optional fields omitted when unset), then one LF. It
// validates m first with the decoder's own rules, so every frame it returns
// decodes back to m; and it refuses a frame over MaxFrameBytes with
// message_too_large. Negotiated.Encode applies the negotiated limits.
func Encode(m Message) ([]byte, error) { return AppendEncode(nil, m) }

// AppendEncode appends m's canonical frame to dst. On error dst is returned
// unchanged.
func AppendEncode(dst []byte, m Message) ([]byte, error) {
	return appendFrame(dst, m, MaxFrameBytes)
}

func appendFrame(dst []byte, m Message, max int) ([]byte, error) {
	if m == nil {
		return dst, badMessage("", "nil message")
	}
	if e := m.validate(); e != nil {
		e.Type = m.Type()
		return dst, e
	}
	start := len(dst)
	w := writer{b: dst}
	m.appendJSON(&w)
	w.b = append(w.b, '}', '\n')
	if n := len(w.b) - start; n > max {
		e := tooLarge(0, max)
		e.Type = m.Type()
		return dst, e
	}
	return w.b, nil
}

// writer appends compact JSON. Strings are quoted by jsontext: only '"',
// '\' and control characters are escaped (\b \f \n \r \t, else \u00xx),
// which is also what JavaScript's JSON.stringify writes.
type writer struct{ b []byte }

// begin writes the envelope `{"v":1,"t":"<t>"`; the caller's fields follow
// and appendFrame closes the object.
func (w *writer) begin(t Type) {
	w.b = append(w.b, `{"v":1,"t":"`...)
	w.b = append(w.b, t...)
	w.b = append(w.b, '"')
}

// key writes `,"name":`.
func (w *writer) key(name string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

func (w *writer) quote(s string) {
	// Validation has proven s valid UTF-8, so AppendQuote cannot fail.
	w.b, _ = jsontext.AppendQuote(w.b, s)
}

func (w *writer) str(name, s string) { w.key(name); w.quote(s) }

func (w *writer) optStr(name, s string) {
	if s != "" {
		w.str(name, s)
	}
}

func (w *writer) int(name string, v int64) { w.key(name); w.b = strconv.AppendInt(w.b, v, 10) }

func (w *writer) uint(name string, v uint64) { w.key(name); w.b = strconv.AppendUint(w.b, v, 10) }

func (w *writer) bool(name string, v bool) { w.key(name); w.boolValue(v) }

func (w *writer) boolValue(v bool) { w.b = strconv.AppendBool(w.b, v) }

// list writes `,"name":[` e0 `,` e1 … `]`, calling elem for each index.
func (w *writer) list(name string, n int, elem func(i int)) {
	w.key(name)
	w.b = append(w.b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		elem(i)
	}
	w.b = append(w.b, ']')
}

// obj starts a nested object with its first member name; fields after it
// use key. The caller closes it with end.
func (w *writer) obj(first string) {
	w.b = append(w.b, '{', '"')
	w.b = append(w.b, first...)
	w.b = append(w.b, '"', ':')
}

func (w *writer) end() { w.b = append(w.b, '}') }
