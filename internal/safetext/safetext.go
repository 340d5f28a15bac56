// Package safetext shows text that came from elsewhere — the lane server,
// a device, an instruction — on a terminal or an approval display without
// letting it act on the display or disguise itself. It decides, in one
// place, which characters are shown as they are and which as an escape.
package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r must be shown as an escape. after is the last
// character shown as itself just before r, or 0 when r comes first or
// after an escape or after text that is not r's (a quote, a separator).
// Unsafe are:
//
//   - every character unicode.IsPrint rejects: C0 and C1 controls and DEL
//     (ESC, CSI U+009B, BEL, CR, backspace …); format characters (Cf): the
//     bidi embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069,
//     marks U+200E, U+200F and U+061C, zero-width U+200B–U+200D, U+2060,
//     U+FEFF, the soft hyphen, tags; every space but U+0020 (U+00A0,
//     U+2000–U+200A, U+3000) and the line and paragraph separators;
//     private-use, surrogate and unassigned code points;
//   - printable characters that draw nothing: default-ignorable code
//     points (U+034F, U+115F, U+1160, U+3164, U+FFA0 …), variation
//     selectors, U+2800 (blank braille);
//   - a combining mark that would draw over an ASCII character (after < 0x80)
//     or over the last character of an escape (after 0): it could turn
//     `/` or `-` into something else.
func Unsafe(after, r rune) bool {
	switch {
	case !unicode.IsPrint(r):
		return true
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r), r == '\u2800':
		return true
	case unicode.IsMark(r):
		return after < utf8.RuneSelf
	}
	return false
}

// Escape returns r spelled as a Go escape: \a \b \f \n \r \t \v, \xHH
// below U+0080, \uHHHH, \UHHHHHHHH.
func Escape(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	switch {
	case r < utf8.RuneSelf:
		return `\x` + hex(uint32(r), 2)
	case r <= 0xffff:
		return `\u` + hex(uint32(r), 4)
	}
	return `\U` + hex(uint32(r), 8)
}

// EscapeByte spells one byte of invalid UTF-8: \xHH.
func EscapeByte(b byte) string { return `\x` + hex(uint32(b), 2) }

func hex(v uint32, digits int) string {
	const d = "0123456789abcdef"
	b := make([]byte, digits)
	for i := digits - 1; i >= 0; i-- {
		b[i] = d[v&0xf]
		v >>= 4
	}
	return string(b)
}

// Clean reports whether s is valid UTF-8 without an Unsafe character, so
// that String returns it unchanged.
func Clean(s string) bool {
	after := rune(0)
	for i, r := range s {
		if r == utf8.RuneError && isInvalid(s[i:]) || Unsafe(after, r) {
			return false
		}
		after = r
	}
	return true
}

func isInvalid(s string) bool {
	_, n := utf8.DecodeRuneInString(s)
	return n == 1
}

// String is s for a terminal: every Unsafe character and every byte of
// invalid UTF-8 replaced by its escape, everything else as it is, so
// ordinary names (é, 世界, spaces, quotes) stay readable. A backslash is
// not escaped: text that already holds one reads as it did. Use it for
// every string from the lane or a device that reaches a terminal — never
// for file content or command output, which are data and stay exact.
func String(s string) string {
	if Clean(s) {
		return s
	}
	var b strings.Builder
	after := rune(0)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(EscapeByte(s[i]))
			after = 0
		case Unsafe(after, r):
			b.WriteString(Escape(r))
			after = 0
		default:
			b.WriteString(s[i : i+n])
			after = r
		}
		i += n
	}
	return b.String()
}

// JSON is encoded JSON (as encoding/json writes it) for a terminal: every
// Unsafe character at or above U+007F becomes a \uXXXX escape (a surrogate
// pair above U+FFFF), so the document decodes to the same value. The
// encoder has already escaped the C0 controls inside strings; the newlines
// and spaces of indentation outside strings are kept.
func JSON(b []byte) []byte {
	var out []byte
	after := rune(0)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r >= 0x7f && !(r == utf8.RuneError && n == 1) && Unsafe(after, r) {
			if out == nil {
				out = append(make([]byte, 0, len(b)+16), b[:i]...)
			}
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				out = append(out, `\u`+hex(uint32(r1), 4)+`\u`+hex(uint32(r2), 4)...)
			} else {
				out = append(out, `\u`+hex(uint32(r), 4)...)
			}
			after = 0
		} else {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			after = r
		}
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}
