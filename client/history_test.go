package client

import (
	"testing"
	"time"
)

// The history options become GET /v1/instructions' query: the zero ones
// are left out, times are RFC 3339 in UTC.
func TestHistoryOptionsQuery(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, tt := range []struct {
		opts HistoryOptions
		want string
	}{
		{HistoryOptions{}, ""},
		{HistoryOptions{Device: "dev_1", Cursor: "aDE6Mw"}, "?cursor=aDE6Mw&device=dev_1"},
		{HistoryOptions{Since: at, Limit: 5}, "?limit=5&since=2026-12-06T09%3A00%3A00Z"},
		{HistoryOptions{Outcome: "cancelled:killed_running", Identity: "idn_1", Session: "s 1", Until: at},
			"?identity=idn_1&outcome=cancelled%3Akilled_running&session=s+1&until=2026-12-06T09%3A00%3A00Z"},
	} {
		if got := tt.opts.query(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.opts, got, tt.want)
		}
	}
}
