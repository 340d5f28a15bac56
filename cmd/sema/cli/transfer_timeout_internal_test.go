package cli

import (
	"testing"
	"time"
)

// A put or get of a large file is not cut at the 30 s default: unless
// --timeout is given, the device's limit grows by a second per MiB; given,
// it is exactly what the user said.
func TestTransferTimeoutGrowsWithTheFileUnlessGiven(t *testing.T) {
	cases := []struct {
		flags []string
		size  int64
		want  time.Duration
	}{
		{nil, 0, 30 * time.Second},
		{nil, 1<<20 - 1, 30 * time.Second},
		{nil, 1 << 30, 30*time.Second + 1024*time.Second},
		{[]string{"--timeout", "45s"}, 1 << 30, 45 * time.Second},
	}
	for _, c := range cases {
		cmd := fsVerb("put LOCAL PATH", "", 2, 2, nil, nil)
		if err := cmd.ParseFlags(c.flags); err != nil {
			t.Fatal(err)
		}
		// fsVerb keeps its flags in its closure: read --timeout back.
		timeout, _ := cmd.Flags().GetDuration("timeout")
		got := fsCall{c: cmd, f: &fsFlags{timeout: timeout}}.transferTimeout(c.size)
		if got != c.want {
			t.Errorf("%v, %d bytes: %v, want %v", c.flags, c.size, got, c.want)
		}
	}
}
