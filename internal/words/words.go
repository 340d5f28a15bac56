// Package words spells the counts and phrases of messages people read.
package words

import "strconv"

// Count is n and the noun's form for n: "1 byte", "0 bytes", "2 bytes".
func Count[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(int64(n), 10) + " " + many
}

// Bytes is Count for bytes.
func Bytes[N ~int | ~int64](n N) string { return Count(n, "byte", "bytes") }
