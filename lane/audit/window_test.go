package audit

import (
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

func refusedUpgrade(remote string) store.AuditEvent {
	return store.AuditEvent{Event: eventUpgradeRefused, Reason: "preauth_cap_per_addr", RemoteAddr: remote}
}

// Identical refusals from one address within a window are one row
// with a count (the flood measured was 3,000 refused upgrades in 0.65 s).
func TestIdenticalRefusalsWithinAWindowAreOneRowWithACount(t *testing.T) {
	w := newRefusalWindows(10*time.Second, 16)
	t0 := start
	for i := range 3000 {
		if !w.add(refusedUpgrade("192.0.2.1"), t0.Add(time.Duration(i)*650*time.Millisecond/3000)) {
			t.Fatal("a refusal was not held")
		}
	}
	for range 5 {
		w.add(refusedUpgrade("192.0.2.2"), t0.Add(time.Second))
	}
	if next, ok := w.next(); !ok || !next.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("next = %v, %v; want the first window's end", next, ok)
	}
	if rows := w.closed(t0.Add(10*time.Second - time.Millisecond)); len(rows) != 0 {
		t.Fatalf("%d rows before the window closed", len(rows))
	}
	rows := w.closed(t0.Add(11 * time.Second))
	if len(rows) != 2 || rows[0].RemoteAddr != "192.0.2.1" || rows[0].Count != 3000 || rows[1].RemoteAddr != "192.0.2.2" || rows[1].Count != 5 {
		t.Fatalf("rows = %+v; want 3000 from 192.0.2.1, then 5 from 192.0.2.2", rows)
	}
	if _, ok := w.next(); ok {
		t.Fatal("a window is still open")
	}
	// After the window, the same refusal opens a new one.
	w.add(refusedUpgrade("192.0.2.1"), t0.Add(12*time.Second))
	if rows := w.all(); len(rows) != 1 || rows[0].Count != 1 {
		t.Fatalf("after the window: %+v, want one row of count 1", rows)
	}
}

// Refusals that differ in event, reason, address, identity or device are
// not identical: each kind has its own row.
func TestRefusalsOfAnotherKindAreAnotherRow(t *testing.T) {
	w := newRefusalWindows(10*time.Second, 16)
	base := store.AuditEvent{Event: eventHelloRejected, Reason: "auth_failed", RemoteAddr: "192.0.2.1", DeviceID: "dev_A", IdentityID: "idn_A"}
	kinds := []func(*store.AuditEvent){
		func(*store.AuditEvent) {},
		func(e *store.AuditEvent) { e.Event = "device.frame_rejected" },
		func(e *store.AuditEvent) { e.Reason = "revoked" },
		func(e *store.AuditEvent) { e.RemoteAddr = "192.0.2.9" },
		func(e *store.AuditEvent) { e.DeviceID = "dev_B" },
		func(e *store.AuditEvent) { e.IdentityID = "idn_B" },
	}
	for range 2 {
		for _, k := range kinds {
			e := base
			k(&e)
			w.add(e, start)
		}
	}
	rows := w.all()
	if len(rows) != len(kinds) {
		t.Fatalf("%d rows for %d kinds", len(rows), len(kinds))
	}
	for i, r := range rows {
		if r.Count != 2 {
			t.Errorf("row %d (%+v) counts %d, want 2", i, r, r.Count)
		}
	}
	if rows[1].Event != "device.frame_rejected" || rows[5].IdentityID != "idn_B" {
		t.Errorf("rows out of their opening order: %+v", rows)
	}
}

// The windows are bounded: a new kind beyond them is not held (it is
// written as it is), while the kinds already held keep counting.
func TestFullRefusalWindowsLetANewKindThrough(t *testing.T) {
	w := newRefusalWindows(10*time.Second, 2)
	if !w.add(refusedUpgrade("192.0.2.1"), start) || !w.add(refusedUpgrade("192.0.2.2"), start) {
		t.Fatal("the first two kinds were not held")
	}
	if w.add(refusedUpgrade("192.0.2.3"), start) {
		t.Fatal("a third kind was held beyond the bound")
	}
	if !w.add(refusedUpgrade("192.0.2.1"), start) {
		t.Fatal("a held kind stopped counting")
	}
	if rows := w.all(); len(rows) != 2 || rows[0].Count != 2 {
		t.Fatalf("rows = %+v", rows)
	}
}
