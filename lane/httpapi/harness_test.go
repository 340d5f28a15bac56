package httpapi

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// testLane is the HTTP API over a real lane on a real SQLite file, served
// by a real HTTP server, on a fake clock.
type testLane struct {
	*API
	t     testing.TB
	url   string
	clock *clock.Fake // the lane's clock (Config.Clock)
}

func newTestLane(t testing.TB, mutate ...func(*lane.Config)) *testLane {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 10, 0, time.UTC))
	cfg := lane.Config{Store: st, Logger: slog.New(slog.DiscardHandler), Clock: clk, DrainGrace: -1} // the fake clock would never end a grace
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := lane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	l := &testLane{API: New(srv), t: t, clock: clk}
	hs := httptest.NewServer(l)
	t.Cleanup(hs.Close)
	l.url = hs.URL
	return l
}

// user creates an identity and returns its API key.
func (l *testLane) user(name string) (store.Identity, string) {
	l.t.Helper()
	idn, key, err := lane.CreateIdentity(l.t.Context(), l.store, name)
	if err != nil {
		l.t.Fatal(err)
	}
	return idn, key
}

// do sends a request with apiKey and returns the answer, read whole.
func (l *testLane) do(method, path, apiKey, body string) lanetest.Response {
	l.t.Helper()
	return lanetest.Do(l.t, l.url, method, path, apiKey, body)
}

// issueToken is a new enrollment token of the identity of apiKey.
func (l *testLane) issueToken(apiKey string) string {
	l.t.Helper()
	tok, err := lanetest.IssueToken(l.t.Context(), l.url, apiKey)
	if err != nil {
		l.t.Fatal(err)
	}
	return tok
}

// auditRows waits for at least n audit rows of f (the auditor writes
// them asynchronously) and returns them.
func (l *testLane) auditRows(f store.AuditFilter, n int) []store.AuditEvent {
	l.t.Helper()
	var rows []store.AuditEvent
	eventually(l.t, "the audit rows", func() bool {
		var err error
		rows, err = l.store.AuditEvents(l.t.Context(), f)
		return err == nil && len(rows) >= n
	})
	return rows
}
