package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("SEMA_TEST_POSTGRES", "postgres://from-env/db")
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.postgres != "postgres://from-env/db" || c.size != 1<<30 || c.trips != 500 || c.rounds != 3 {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseFlags([]string{"-postgres", "postgres://flag/db", "-size", "64M", "-trips", "20", "-rounds", "1"}, io.Discard)
	if err != nil || c.postgres != "postgres://flag/db" || c.size != 64<<20 || c.trips != 20 || c.rounds != 1 {
		t.Fatalf("parsed: %+v, %v", c, err)
	}
}

// Without a PostgreSQL the runner says how to get one, before it builds
// or starts anything.
func TestParseFlagsRefuses(t *testing.T) {
	t.Setenv("SEMA_TEST_POSTGRES", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "scripts/with-postgres"},
		{[]string{"-postgres", "x", "-trips", "0"}, "-trips 0"},
		{[]string{"-postgres", "x", "-size", "12Q"}, "-size"},
		{[]string{"-postgres", "x", "extra"}, `unexpected argument "extra"`},
	} {
		if _, err := parseFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error naming %q", tc.args, err, tc.want)
		}
	}
}
