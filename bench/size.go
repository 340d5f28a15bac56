package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count as the ratios runner takes it: a whole
// number with an optional binary unit, K, M, G or T, written alone, with
// "iB" ("64MiB") or with "B" ("64MB" is 64 MiB too, as dd and head take
// it). Bytes may be written "B" or bare. Zero, negatives, fractions and
// sizes over 1 TiB are refused with an error naming the value.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "KMGTiBkmgtib")
	unit := strings.ToUpper(t[len(num):])
	shift, ok := map[string]uint{"": 0, "B": 0, "K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20,
		"G": 30, "GB": 30, "GIB": 30, "T": 40, "TB": 40, "TIB": 40}[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use K, M, G or T)", s, t[len(num):])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: not a positive whole number of bytes", s)
	}
	if n > (1<<40)>>shift {
		return 0, fmt.Errorf("size %q: more than 1 TiB", s)
	}
	return n << shift, nil
}

// FormatSize is n in the largest binary unit that divides it ("1 GiB",
// "64 MiB", "1000 B").
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}
