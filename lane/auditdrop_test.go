package lane

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sema-agent/sema/lane/audit"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/lane/store/sqlstore"
)

// gatedStore holds the audit writer's first write until the test opens the
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

// Audit is called from the audit writer's goroutine only.
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

func connected(i int) store.AuditEvent {
	return store.AuditEvent{DeviceID: fmt.Sprintf("dev_%05d", i), Event: string(EventConnected), RemoteAddr: "127.0.0.1"}
}

func auditRowCount(t *testing.T, st *sqlstore.Store, where string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM audit "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// When the bound drops rows (forced small here), the drop is itself an
// audit row, counting them, and a metric.
func TestADropIsAnAuditRowAndAMetric(t *testing.T) {
	l := newWSLane(t)
	st := l.store.(*sqlstore.Store)
	gated := newGatedStore(st)
	l.srv.audits.Close() // the lane's own, replaced by one with a bound of 10
	l.srv.audits = audit.Start(audit.Config{Store: gated, Logger: quietLogger(), Clock: l.clk, Retention: DefaultConfig().AuditRetention, Merge: isRefusal, MaxQueued: 10})
	t.Cleanup(l.srv.audits.Close)
	l.srv.audit(context.Background(), connected(0))
	<-gated.entered
	for i := 1; i <= 25; i++ {
		l.srv.audit(context.Background(), connected(i))
	}
	close(gated.gate)
	l.srv.audits.Flush()
	if got := auditRowCount(t, st, "WHERE event = 'device.connected'"); got != 11 {
		t.Fatalf("%d rows written, want the one being written and the 10 queued", got)
	}
	drops := l.auditRows(store.AuditFilter{Event: string(EventAuditDropped)})
	if len(drops) != 1 || drops[0].Count != 15 || drops[0].Reason != audit.ReasonQueueFull {
		t.Fatalf("drop rows %+v, want one counting 15, reason %s", drops, audit.ReasonQueueFull)
	}
	var metrics strings.Builder
	l.doors.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), "\nsema_lane_audit_rows_dropped_total 15\n") {
		t.Fatalf("/metrics does not count the 15 dropped rows:\n%s", metrics.String())
	}
}
