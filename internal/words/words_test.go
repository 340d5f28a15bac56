package words

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 bytes"}, {1, "1 byte"}, {2, "2 bytes"}, {-1, "-1 bytes"}} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := Count(1, "device", "devices"); got != "1 device" {
		t.Errorf("Count(1) = %q", got)
	}
}
