package nexting

import (
	"fmt"
	"unicode/utf8"
)

// Validators shared by every message's validate method. They run on typed
// values, so the decoder (after parsing) and the encoder (before writing)
// apply exactly the same bounds.

// validID reports whether s is a request id: 1–64 characters of
// [A-Za-z0-9._:-] (short spec §1).
func validID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkID(field, s string) *Error {
	if !validID(s) {
		return badMessage(field, "must be 1-64 characters of [A-Za-z0-9._:-]")
	}
	return nil
}

// isControl reports a control character: Unicode category Cc, that is
// U+0000–U+001F, U+007F and U+0080–U+009F. (The published spec names only
// the first two ranges; C1 controls are refused too, see docs/nexting.md.)
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// textRule says which control characters a string may hold.
type textRule int

const (
	anyText   textRule = iota // only U+0000 is refused (present.sum)
	noControl                 // no control character at all
	lfTab                     // LF and TAB are the only controls allowed (text.content)
)

// checkText enforces a byte-length range, valid UTF-8 and a textRule. The
// decoder has already refused invalid UTF-8 and U+0000; the encoder relies
// on this check for strings built in Go.
func checkText(field, s string, min, max int, rule textRule) *Error {
	if len(s) < min || len(s) > max {
		if min == max {
			return badMessage(field, fmt.Sprintf("must be %d UTF-8 bytes", min))
		}
		return badMessage(field, fmt.Sprintf("must be %d-%d UTF-8 bytes", min, max))
	}
	if !utf8.ValidString(s) {
		return badMessage(field, "invalid UTF-8")
	}
	for _, c := range s {
		switch {
		case c == 0:
			return badMessage(field, "contains U+0000")
		case rule == noControl && isControl(c):
			return badMessage(field, "contains a control character")
		case rule == lfTab && isControl(c) && c != '\n' && c != '\t':
			return badMessage(field, "contains a control character other than LF or TAB")
		}
	}
	return nil
}

func checkRange(field string, v, min, max int64) *Error {
	if v < min || v > max {
		return badMessage(field, fmt.Sprintf("must be %d-%d", min, max))
	}
	return nil
}

func checkCount(field string, n, min, max int) *Error {
	if n < min || n > max {
		return badMessage(field, fmt.Sprintf("must have %d-%d entries", min, max))
	}
	return nil
}

func checkEnum(field string, ok bool) *Error {
	if !ok {
		return badMessage(field, "not a member of the enum")
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...*Error) *Error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func elemField(array string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s[%d]", array, i)
	}
	return fmt.Sprintf("%s[%d].%s", array, i, name)
}
