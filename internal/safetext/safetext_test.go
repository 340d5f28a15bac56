package safetext_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sema-agent/sema/internal/safetext"
)

// Ordinary text is shown as it is; every character that could act on a
// terminal or hide itself is an escape.
func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"laptop":                         "laptop",
		"Jörg's Mac — 世界 😀":              "Jörg's Mac — 世界 😀",
		`C:\Users "quoted"`:              `C:\Users "quoted"`,
		"résumé":                         "résumé",                 // precomposed
		"ре\u0301зюме":                   "ре\u0301зюме",           // a mark after a Cyrillic letter
		"e\u0301":                        `e\u0301`,                // a mark on ASCII could disguise it
		"\u0338/etc":                     `\u0338/etc`,             // a leading mark
		"\x1b[2J\x1b]0;pwned\x07":        `\x1b[2J\x1b]0;pwned\a`,  // CSI, OSC, BEL
		"\u009b31m":                      `\u009b31m`,              // 8-bit CSI
		"a\rb\bc\x7fd\ne\tf\x00":         `a\rb\bc\x7fd\ne\tf\x00`, // C0 and DEL
		"bad \xff\xfe byte":              `bad \xff\xfe byte`,      // invalid UTF-8
		"\ufffd":                         "\ufffd",                 // a valid replacement character is visible
		"\x1b\u0301":                     `\x1b\u0301`,             // a mark after an escape
		"\u00a0\u2000\u3000\u2028\u2029": `\u00a0\u2000\u3000\u2028\u2029`,
		"\U000e0041\U000f0000":           `\U000e0041\U000f0000`, // tag, private use
	} {
		if got := safetext.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		if safetext.Clean(in) != (in == want) {
			t.Errorf("Clean(%q) = %v", in, safetext.Clean(in))
		}
	}
}

// Bidi controls and invisible format characters are escaped, one by one:
// U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C, the zero-width ones,
// the invisible fillers and the variation selectors.
func TestBidiAndInvisibleCharactersAreEscaped(t *testing.T) {
	unsafe := []rune{
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e, // embeddings, overrides, pop
		0x2066, 0x2067, 0x2068, 0x2069, // isolates
		0x200e, 0x200f, 0x061c, // LRM, RLM, ALM
		0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0x180e, 0x2061, 0x2064, // zero-width, soft hyphen, invisible operators
		0x034f, 0x115f, 0x1160, 0x17b4, 0x3164, 0xffa0, 0x2800, // printable but blank
		0xfe00, 0xfe0f, 0xe0100, 0xe0001, 0xe007f, // variation selectors, tags
		0x0378, 0x10ffff, // unassigned, noncharacter
	}
	for _, r := range unsafe {
		in := "a" + string(r) + "b"
		got := safetext.String(in)
		if got != "a"+safetext.Escape(r)+"b" || !strings.Contains(got, `\`) {
			t.Errorf("U+%04X: %q", r, got)
		}
		if safetext.Clean(in) {
			t.Errorf("U+%04X counted clean", r)
		}
	}
	for _, r := range []rune{0x202e, 0x2066, 0x200f} {
		if got := safetext.String("x" + string(r)); strings.ContainsRune(got, r) {
			t.Errorf("U+%04X reached the output: %q", r, got)
		}
	}
	// Trojan-source shape: an override inside a comment-looking name.
	if got := safetext.String("report\u202eexe.pdf"); got != `report\u202eexe.pdf` {
		t.Errorf("%q", got)
	}
}

// JSON output keeps its value and its layout; unsafe characters become
// \u escapes, also above U+FFFF.
func TestJSON(t *testing.T) {
	in := map[string]string{"name": "a\u202eb\u009b\x7f\U000e0041 é e\u0301 ok", "plain": "x"}
	raw, _ := json.MarshalIndent(in, "", "  ")
	got := safetext.JSON(raw)
	for _, r := range []rune{0x202e, 0x9b, 0x7f, 0xe0041, 0x301} {
		if strings.ContainsRune(string(got), r) {
			t.Errorf("U+%04X left in %s", r, got)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["name"] != in["name"] || back["plain"] != "x" {
		t.Fatalf("%s does not decode to the same value: %v %q", got, err, back)
	}
	if !strings.Contains(string(got), "\n  \"name\"") || !strings.Contains(string(got), "é") {
		t.Errorf("layout or readable text lost: %s", got)
	}
	clean, _ := json.Marshal(map[string]string{"k": "plain é"})
	if got := safetext.JSON(clean); string(got) != string(clean) {
		t.Errorf("changed clean JSON: %s", got)
	}
}

// Whatever the input, String's output is valid UTF-8 with no unsafe
// character, and clean input comes back unchanged.
func FuzzString(f *testing.F) {
	for _, s := range []string{"ok", "\x1b[31m", "a\u202eb", "e\u0301", "\xff", "\U000e0041"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := safetext.String(s)
		if !utf8.ValidString(got) || !safetext.Clean(got) {
			t.Fatalf("String(%q) = %q", s, got)
		}
		if safetext.Clean(s) && got != s {
			t.Fatalf("clean %q changed to %q", s, got)
		}
	})
}
