package nexting

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// ok marks a case that must be accepted.
const ok Code = ""

type frameCase struct {
	name  string
	frame string // without the LF
	want  Code
}

// runFrameCases decodes each frame and checks the verdict and code; an
// accepted frame must re-encode to a frame that decodes to the same value.
func runFrameCases(t *testing.T, cases []frameCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Decode([]byte(c.frame))
			if c.want == ok {
				if err != nil {
					t.Fatalf("refused: %v\nframe %s", err, c.frame)
				}
				roundTrip(t, m)
				return
			}
			if err == nil {
				t.Fatalf("accepted %#v, want %s\nframe %s", m, c.want, c.frame)
			}
			if got := CodeOf(err); got != c.want {
				t.Fatalf("code %s, want %s (%v)", got, c.want, err)
			}
		})
	}
}

// roundTrip checks encode(m) decodes to m and re-encodes identically.
func roundTrip(t testing.TB, m Message) {
	t.Helper()
	enc, err := Encode(m)
	if err != nil {
		t.Fatalf("encode %#v: %v", m, err)
	}
	m2, err := DecodeFrame(enc)
	if err != nil {
		t.Fatalf("re-decode %s: %v", enc, err)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Fatalf("round trip differs\n got %#v\nwant %#v", m2, m)
	}
	enc2, err := Encode(m2)
	if err != nil || string(enc2) != string(enc) {
		t.Fatalf("re-encode differs: %s vs %s (%v)", enc2, enc, err)
	}
}

var rep = strings.Repeat

// join renders n comma-separated items made by f.
func join(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return strings.Join(parts, ",")
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }

// nested returns n nested arrays around inner: [[…inner…]].
func nested(n int, inner string) string { return rep("[", n) + inner + rep("]", n) }
