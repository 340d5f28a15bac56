package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

func testAudit(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	events := []store.AuditEvent{
		{IdentityID: alice.ID, Event: "device.enroll_refused", Reason: "token_reuse"},
		{DeviceID: "dev_A", Event: "device.hello_rejected", Reason: "auth_failed"},
		{IdentityID: alice.ID, DeviceID: "dev_A", Event: "device.revoked"},
	}
	for _, e := range events {
		if err := s.Audit(ctx(t), e); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.AuditEvents(ctx(t), store.AuditFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("AuditEvents = %d rows, %v", len(all), err)
	}
	for i, e := range all {
		want := events[i]
		if e.Event != want.Event || e.Reason != want.Reason || e.IdentityID != want.IdentityID || e.DeviceID != want.DeviceID || e.At.IsZero() {
			t.Errorf("row %d = %+v, want %+v with a time", i, e, want)
		}
		if i > 0 && (e.ID <= all[i-1].ID || e.At.Before(all[i-1].At)) {
			t.Errorf("rows out of order: %+v after %+v", e, all[i-1])
		}
	}
	byDevice, _ := s.AuditEvents(ctx(t), store.AuditFilter{DeviceID: "dev_A"})
	byIdentity, _ := s.AuditEvents(ctx(t), store.AuditFilter{IdentityID: alice.ID, Event: "device.revoked"})
	if len(byDevice) != 2 || len(byIdentity) != 1 {
		t.Errorf("filters: %d rows by device (want 2), %d by identity and event (want 1)", len(byDevice), len(byIdentity))
	}
}

func auditCount(t *testing.T, s Backend, where string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRowContext(ctx(t), `SELECT count(*) FROM audit `+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A refusal row names the address it came from and how many
// identical refusals it stands for; a row written without a count counts
// one.
func testAuditRemoteAndCount(t *testing.T, s Backend) {
	err := s.Audit(ctx(t),
		store.AuditEvent{Event: "device.upgrade_refused", Reason: "preauth_cap_per_addr", RemoteAddr: "192.0.2.7", Count: 3000},
		store.AuditEvent{Event: "device.upgrade_refused", Reason: "preauth_cap_per_addr", RemoteAddr: "2001:db8::1"},
		store.AuditEvent{DeviceID: "dev_A", Event: "device.connected"})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.AuditEvents(ctx(t), store.AuditFilter{RemoteAddr: "192.0.2.7"})
	if err != nil || len(rows) != 1 || rows[0].Count != 3000 || rows[0].Reason != "preauth_cap_per_addr" {
		t.Fatalf("rows from 192.0.2.7 = %+v, %v; want one with count 3000", rows, err)
	}
	all, _ := s.AuditEvents(ctx(t), store.AuditFilter{})
	if len(all) != 3 || all[1].RemoteAddr != "2001:db8::1" || all[1].Count != 1 || all[2].RemoteAddr != "" || all[2].Count != 1 {
		t.Fatalf("rows = %+v; want the v6 address with count 1, then a row with no address, count 1", all)
	}
}

// The auditor writes its queue in batches: one call, one transaction,
// 15,000 rows, none lost.
func testAuditBatch(t *testing.T, s Backend) {
	const n = 15000
	rows := make([]store.AuditEvent, n)
	for i := range rows {
		rows[i] = store.AuditEvent{DeviceID: fmt.Sprintf("dev_%d", i), Event: "device.connected", RemoteAddr: "127.0.0.1"}
	}
	if err := s.Audit(ctx(t), rows...); err != nil {
		t.Fatal(err)
	}
	if got := auditCount(t, s, `WHERE event = 'device.connected'`); got != n {
		t.Fatalf("%d rows written, want %d", got, n)
	}
	last, err := s.AuditEvents(ctx(t), store.AuditFilter{DeviceID: fmt.Sprintf("dev_%d", n-1)})
	if err != nil || len(last) != 1 {
		t.Fatalf("the last row: %+v, %v", last, err)
	}
	if err := s.Audit(ctx(t)); err != nil {
		t.Fatalf("no rows: %v", err)
	}
}

// Retention is measured by the database clock: rows are aged here by
// moving their database timestamps back (and sealing the chain again, as
// the aging is an edit), and PruneAudit compares them with the database's
// now. The events in keep are never pruned; the chain stays verifiable
// from the oldest row kept.
func testPruneAudit(t *testing.T, s Backend) {
	for _, e := range []string{"server.admin_created", "old", "old", "recent"} {
		if err := s.Audit(ctx(t), store.AuditEvent{Event: e}); err != nil {
			t.Fatal(err)
		}
	}
	age := func(event string, by time.Duration) {
		if _, err := s.DB().ExecContext(ctx(t), fmt.Sprintf(`UPDATE audit SET at_ms = at_ms - %d WHERE event = '%s'`, by.Milliseconds(), event)); err != nil {
			t.Fatal(err)
		}
	}
	age("old", 2*time.Hour)
	age("server.admin_created", 2*time.Hour)
	age("recent", 30*time.Minute)
	reseal(t, s)
	n, err := s.PruneAudit(ctx(t), time.Hour, []string{"server.admin_created"})
	if err != nil || n != 2 {
		t.Fatalf("PruneAudit = %d, %v; want the 2 old rows", n, err)
	}
	if left := auditCount(t, s, ``); left != 2 || auditCount(t, s, `WHERE event = 'old'`) != 0 {
		t.Fatalf("%d rows left, want recent and server.admin_created", left)
	}
	rep := verify(t, s, nil)
	if rep.Problem != nil || rep.From.Seq != 3 || rep.Rows != 1 || rep.Head.Seq != 4 {
		t.Fatalf("after pruning: %+v; want the chain verified from its anchor (seq 3) to seq 4", rep)
	}
	if n, err := s.PruneAudit(ctx(t), time.Hour, nil); err != nil || n != 1 {
		t.Fatalf("PruneAudit without keep = %d, %v; want the kept row too", n, err)
	}
	if rep := verify(t, s, nil); rep.Problem != nil || rep.Rows != 1 {
		t.Fatalf("after pruning the kept row: %+v", rep)
	}
	if _, err := s.PruneAudit(ctx(t), 0, nil); err == nil {
		t.Fatal("a zero retention was accepted")
	}
}
