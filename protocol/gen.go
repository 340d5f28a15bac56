package protocol

import (
	"fmt"
	"strconv"
)

// Gen is a connection generation: a 64-bit store value that travels as a
// canonical decimal string ("7", never 7, "07", "+7", " 7" or "7.0"; §1.5,
// §2.2). Only canonical spellings parse, so formatting a parsed Gen gives back
// exactly the string that was received.
type Gen uint64

// ParseGen accepts only the canonical decimal form: "0", or a non-zero digit
// followed by digits, within 64 bits.
func ParseGen(s string) (Gen, error) {
	if !canonicalDecimal(s) {
		return 0, fmt.Errorf("gen %q is not a canonical decimal string", s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("gen %q does not fit 64 bits", s)
	}
	return Gen(n), nil
}

// String returns the canonical decimal form.
func (g Gen) String() string { return strconv.FormatUint(uint64(g), 10) }

// MarshalText makes Gen a JSON string in every encoder.
func (g Gen) MarshalText() ([]byte, error) { return strconv.AppendUint(nil, uint64(g), 10), nil }

// UnmarshalText accepts only the canonical form.
func (g *Gen) UnmarshalText(b []byte) error {
	v, err := ParseGen(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

func canonicalDecimal(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
