package protocol

// crockford maps an upper-case Crockford base32 character to its value, or
// 0xFF. Lower case and the excluded letters I, L, O, U map to 0xFF: §1.3 makes
// epoch a byte-exact key, so two spellings of one ULID must never both pass.
var crockford = func() (t [256]byte) {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	for i := range t {
		t[i] = 0xFF
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// DecodeULID16 decodes a 26-character upper-case Crockford base32 ULID to its
// 128 bits, most significant byte first. It refuses lower case, the letters I
// L O U, any length but 26, and a first character above 7 (128-bit overflow);
// a Z anywhere else is just the value 31 (§1.3, the epoch table).
func DecodeULID16(s string) ([16]byte, bool) {
	var out [16]byte
	if len(s) != 26 {
		return out, false
	}
	// 26 characters carry 130 bits; the top two must be zero, which is what
	// "first character 0–7" means.
	var hi, lo uint64 // the 128-bit value, built 5 bits at a time
	for i := range 26 {
		v := crockford[s[i]]
		if v == 0xFF || (i == 0 && v > 7) {
			return out, false
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	for i := range 8 {
		out[i] = byte(hi >> (56 - 8*i))
		out[8+i] = byte(lo >> (56 - 8*i))
	}
	return out, true
}

// ValidULID reports whether s is a strict 26-character upper-case ULID.
func ValidULID(s string) bool {
	_, ok := DecodeULID16(s)
	return ok
}
