package audit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/lane/store/sqlstore"
)

// The events these tests write: one the lane merges as a refusal, one it
// does not.
const (
	eventConnected      = "device.connected"
	eventUpgradeRefused = "device.upgrade_refused"
	eventHelloRejected  = "device.hello_rejected"
	testRetention       = 720 * time.Hour
	waitBound           = 10 * time.Second
)

var start = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// isRefusal merges what the lane merges of the events above.
func isRefusal(event string) bool { return event == eventUpgradeRefused || event == eventHelloRejected }

// eventually waits, bounded, for the writer's goroutine to have written.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// gatedStore holds the auditor's first write until the test opens the
// gate, so that rows pile up behind it as they would behind a slow disk.
type gatedStore struct {
	store.Store
	entered chan struct{} // closed when the first write begins
	gate    chan struct{} // the test closes it to let writes through
	first   bool
}

func newGatedStore(st store.Store) *gatedStore {
	return &gatedStore{Store: st, entered: make(chan struct{}), gate: make(chan struct{})}
}

// Audit is called from the auditor's goroutine only.
func (g *gatedStore) Audit(ctx context.Context, events ...store.AuditEvent) error {
	if !g.first {
		g.first = true
		close(g.entered)
	}
	<-g.gate
	return g.Store.Audit(ctx, events...)
}

func openRegistry(t *testing.T) *sqlstore.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testWriter(t *testing.T, st store.Store, mutate func(*Config)) (*Writer, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(start)
	cfg := Config{Store: st, Logger: quietLogger(), Clock: clk, Retention: testRetention, Merge: isRefusal}
	if mutate != nil {
		mutate(&cfg)
	}
	a := Start(cfg)
	t.Cleanup(a.Close)
	return a, clk
}

func connected(i int) store.AuditEvent {
	return store.AuditEvent{DeviceID: fmt.Sprintf("dev_%05d", i), Event: eventConnected, RemoteAddr: "127.0.0.1"}
}

func auditRowCount(t *testing.T, st *sqlstore.Store, where string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM audit "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A burst of 15,000 connects queued behind a stalled write loses no
// audit row: the queue holds them and the writer writes them in batches
// (a queue of 4,096 single-row inserts would drop up to 13,001).
func TestTheAuditorLosesNoRowOf15000Queued(t *testing.T) {
	st := openRegistry(t)
	gated := newGatedStore(st)
	a, _ := testWriter(t, gated, nil)
	a.Add(connected(0))
	<-gated.entered // the writer holds row 0; the rest queue behind it
	const n = 15000
	for i := 1; i <= n; i++ {
		a.Add(connected(i))
	}
	close(gated.gate)
	a.Flush()
	if got := auditRowCount(t, st, "WHERE event = 'device.connected'"); got != n+1 {
		t.Fatalf("%d of %d rows written", got, n+1)
	}
	if dropped := auditRowCount(t, st, "WHERE event = '"+EventRowsDropped+"'"); dropped != 0 || a.Dropped() != 0 {
		t.Fatalf("%d drop rows, %d dropped; want none", dropped, a.Dropped())
	}
	// Its batches are appended to the audit chain, one after another.
	rep, err := st.VerifyChain(t.Context(), "audit", nil)
	if err != nil || rep.Problem != nil || rep.Rows != n+1 {
		t.Fatalf("the chain after the burst: %+v, %v; want %d rows verified", rep, err, n+1)
	}
}

// The refusals held in a window are written when it closes, by the
// lane's clock, as one row with their count.
func TestAClosingWindowWritesItsRowByItself(t *testing.T) {
	st := openRegistry(t)
	a, clk := testWriter(t, st, nil)
	for range 3000 {
		a.Add(refusedUpgrade("192.0.2.1"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if _, ok := clk.WaitTimer(ctx, func(d time.Duration) bool { return d == Window }); !ok {
		t.Fatal("the writer armed no timer for the window")
	}
	if n := auditRowCount(t, st, ""); n != 0 {
		t.Fatalf("%d rows written before the window closed", n)
	}
	clk.Advance(Window)
	var rows []store.AuditEvent
	eventually(t, "the window's row is written", func() bool {
		rows, _ = st.AuditEvents(t.Context(), store.AuditFilter{Event: eventUpgradeRefused})
		return len(rows) > 0
	})
	if len(rows) != 1 || rows[0].Count != 3000 || rows[0].RemoteAddr != "192.0.2.1" {
		t.Fatalf("rows = %+v; want one from 192.0.2.1 counting 3000", rows)
	}
}

// A window whose close time the clock passes while the auditor is
// arming its timer is still written: the clock is moved at once after
// each refusal, racing the auditor, and every round's row must appear.
func TestAWindowClosedWhileItsTimerIsArmedIsWritten(t *testing.T) {
	st := openRegistry(t)
	a, clk := testWriter(t, st, nil)
	for round := range 50 {
		a.Add(refusedUpgrade(fmt.Sprintf("192.0.2.%d", round+1)))
		clk.Advance(Window)
		eventually(t, fmt.Sprintf("round %d's row", round), func() bool {
			return auditRowCount(t, st, "WHERE event = '"+eventUpgradeRefused+"'") == round+1
		})
	}
}

// Retention. The auditor prunes at start and every hour; the age is
// the database's (rows are aged by moving their timestamps back), and the
// kept events stay.
func TestTheAuditorPrunesAtStartAndEveryHour(t *testing.T) {
	st := openRegistry(t)
	age := func(event string, by time.Duration) {
		t.Helper()
		if err := st.Audit(t.Context(), store.AuditEvent{Event: event}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().ExecContext(t.Context(), `UPDATE audit SET at_ms = at_ms - ? WHERE event = ?`, by.Milliseconds(), event); err != nil {
			t.Fatal(err)
		}
	}
	age("old", 2*time.Hour)
	age("kept", 2*time.Hour)
	age("young", 10*time.Minute)
	_, clk := testWriter(t, st, func(c *Config) { c.Retention, c.Keep = time.Hour, []string{"kept"} })
	eventually(t, "the start prunes the old row", func() bool { return auditRowCount(t, st, "WHERE event = 'old'") == 0 })
	if n := auditRowCount(t, st, "WHERE event IN ('kept', 'young')"); n != 2 {
		t.Fatalf("%d of the kept and the young row left, want both", n)
	}
	age("young", 2*time.Hour) // now over the retention
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if _, ok := clk.WaitTimer(ctx, func(d time.Duration) bool { return d == PruneEvery }); !ok {
		t.Fatal("no hourly prune armed")
	}
	clk.Advance(PruneEvery)
	eventually(t, "the hourly prune", func() bool { return auditRowCount(t, st, "WHERE event = 'young'") == 0 })
	if n := auditRowCount(t, st, "WHERE event = 'kept'"); n != 1 {
		t.Fatal("the kept row was pruned")
	}
}
