package lane

import (
	"context"
	"crypto/rand"
	"errors"
	"github.com/sema-agent/sema/internal/lanetest"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// Doors is the HTTP API over a Server as the tests drive it: package
// httpapi's, which doors_test.go (package lane_test, which may import it)
// puts in NewDoors.
type Doors interface {
	http.Handler
	Metrics() Metrics
	WriteMetrics(io.Writer) error
}

// NewDoors builds the HTTP API over a Server; see Doors.
var NewDoors func(*Server) Doors

// testLane is a real lane over real HTTP on a real SQLite file.
type testLane struct {
	t     testing.TB
	dir   string // the data dir of the SQLite registry
	url   string
	store store.Store
	clock *clock.Fake // the lane's clock (Config.Clock)
	srv   *Server
	doors Doors
}

// advertiseSelf as Config.AdvertiseURL makes newTestLane advertise the
// lane's own test server: a replica its peers reach.
const advertiseSelf = "test:self"

func newTestLane(t testing.TB, mutate ...func(*Config)) *testLane {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// No drain grace: the tests' fake clock would never end it; a test of
	// the grace sets one.
	cfg := Config{Store: st, Clock: clock.NewFake(time.Date(2026, 11, 30, 8, 0, 10, 0, time.UTC)), DrainGrace: -1}
	for _, m := range mutate {
		m(&cfg)
	}
	clk, _ := cfg.Clock.(*clock.Fake)
	hs := httptest.NewUnstartedServer(nil)
	if cfg.AdvertiseURL == advertiseSelf {
		cfg.AdvertiseURL = "http://" + hs.Listener.Addr().String()
	}
	srv, err := New(cfg)
	if err != nil {
		hs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	doors := NewDoors(srv)
	hs.Config.Handler = doors
	hs.Start()
	t.Cleanup(hs.Close)
	return &testLane{t: t, dir: dir, url: hs.URL, store: cfg.Store, clock: clk, srv: srv, doors: doors}
}

// auditRows returns the audit rows written so far (the auditor is
// asynchronous: flush first).
func (l *testLane) auditRows(f store.AuditFilter) []store.AuditEvent {
	l.t.Helper()
	l.srv.audits.Flush()
	rows, err := l.store.AuditEvents(l.t.Context(), f)
	if err != nil {
		l.t.Fatal(err)
	}
	return rows
}

// user creates an identity and returns its API key.
func (l *testLane) user(name string) (store.Identity, string) {
	l.t.Helper()
	idn, key, err := CreateIdentity(l.t.Context(), l.store, name)
	if errors.Is(err, store.ErrNameTaken) {
		// Replicas sharing one registry each make their users: names are
		// unique on a lane, so the second one gets its own.
		idn, key, err = CreateIdentity(l.t.Context(), l.store, name+"-"+rand.Text()[:8])
	}
	if err != nil {
		l.t.Fatal(err)
	}
	return idn, key
}

// response is an answer of the HTTP API, read whole.
type response = lanetest.Response

func (l *testLane) do(method, path, apiKey, body string) response {
	l.t.Helper()
	return lanetest.Do(l.t, l.url, method, path, apiKey, body)
}

func (l *testLane) issueToken(apiKey string) string {
	l.t.Helper()
	tok, err := lanetest.IssueToken(l.t.Context(), l.url, apiKey)
	if err != nil {
		l.t.Fatal(err)
	}
	return tok
}

var (
	newPubkey  = lanetest.NewPubkey
	enrollBody = lanetest.EnrollBody
)

// decode is a 200 answer decoded as a T, its shape pinned to T.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	return lanetest.Decode[T](t, r)
}

// wantError checks an error answer (lanetest.WantError).
func wantError(t *testing.T, r response, status int, code, mentions string) {
	t.Helper()
	lanetest.WantError(t, r, status, code, mentions)
}
