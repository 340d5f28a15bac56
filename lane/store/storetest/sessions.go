package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sema-agent/sema/lane/store"
)

// §9: the first bind wins; binding the same device again is idempotent
// (same boundAt); binding another device returns the binding that holds.
func testFirstBindWins(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d1, d2 := register(t, s, alice.ID), register(t, s, alice.ID)
	if _, err := s.Session(ctx(t), alice.ID, "rs_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unbound session: err = %v, want ErrNotFound", err)
	}
	first, err := s.BindSession(ctx(t), alice.ID, "rs_1", d1.ID, 0)
	if err != nil || first.DeviceID != d1.ID || first.OwnerID != alice.ID || first.RootSessionID != "rs_1" || first.BoundAt.IsZero() {
		t.Fatalf("first bind = %+v, %v", first, err)
	}
	again, err := s.BindSession(ctx(t), alice.ID, "rs_1", d1.ID, 0)
	if err != nil || again != first {
		t.Fatalf("binding the same device again = %+v, %v; want %+v unchanged", again, err, first)
	}
	other, err := s.BindSession(ctx(t), alice.ID, "rs_1", d2.ID, 0)
	if err != nil || other != first {
		t.Fatalf("binding another device = %+v, %v; want the holding binding %+v", other, err, first)
	}
	if got, err := s.Session(ctx(t), alice.ID, "rs_1"); err != nil || got != first {
		t.Fatalf("Session = %+v, %v; want %+v", got, err, first)
	}
}

// §9: sessions belong to an identity like devices do: the same root
// session id of two owners is two sessions, and neither sees the other's.
func testSessionsBelongToTheirOwner(t *testing.T, s Backend) {
	alice, bob := newIdentity(t, s, "alice"), newIdentity(t, s, "bob")
	da, db := register(t, s, alice.ID), register(t, s, bob.ID)
	if _, err := s.BindSession(ctx(t), alice.ID, "shared", da.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx(t), bob.ID, "shared"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob reading alice's session: err = %v, want ErrNotFound", err)
	}
	b, err := s.BindSession(ctx(t), bob.ID, "shared", db.ID, 0)
	if err != nil || b.DeviceID != db.ID || b.OwnerID != bob.ID {
		t.Fatalf("bob's own first bind of the same id = %+v, %v; want his device", b, err)
	}
	if a, _ := s.Session(ctx(t), alice.ID, "shared"); a.DeviceID != da.ID {
		t.Fatalf("alice's session moved to %s", a.DeviceID)
	}
}

// §9: "concurrent submissions produce a single winner": 16 concurrent
// first binds to 16 devices leave exactly one binding, and every caller is
// told the same one.
func testConcurrentFirstBindsOneWinner(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	devices := make([]store.Device, 16)
	for i := range devices {
		devices[i] = register(t, s, alice.ID)
	}
	got := make([]store.Session, len(devices))
	errs := make([]error, len(devices))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range devices {
		wg.Go(func() {
			<-start
			got[i], errs[i] = s.BindSession(ctx(t), alice.ID, "rs_race", d.ID, 0)
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range devices {
		if errs[i] != nil {
			t.Fatalf("bind %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("bind %d was told %+v, bind 0 %+v: two bindings", i, got[i], got[0])
		}
		if got[i].DeviceID == devices[i].ID {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d binds won, want exactly 1", winners)
	}
}

// §9: rebinding is explicit: it replaces the binding (a new boundAt),
// creates one for an unbound session, and is a no-op for the same device.
func testRebindReplacesTheBinding(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d1, d2 := register(t, s, alice.ID), register(t, s, alice.ID)
	created, err := s.RebindSession(ctx(t), alice.ID, "rs_new", d1.ID, 0)
	if err != nil || created.DeviceID != d1.ID || created.BoundAt.IsZero() {
		t.Fatalf("rebinding an unbound session = %+v, %v; want it bound to %s", created, err, d1.ID)
	}
	same, err := s.RebindSession(ctx(t), alice.ID, "rs_new", d1.ID, 0)
	if err != nil || same.DeviceID != created.DeviceID || !same.BoundAt.Equal(created.BoundAt) {
		t.Fatalf("rebinding to the same device = %+v, %v; want %+v unchanged", same, err, created)
	}
	moved, err := s.RebindSession(ctx(t), alice.ID, "rs_new", d2.ID, 0)
	if err != nil || moved.DeviceID != d2.ID || moved.BoundAt.Before(created.BoundAt) {
		t.Fatalf("rebinding to another device = %+v, %v", moved, err)
	}
	if b, _ := s.BindSession(ctx(t), alice.ID, "rs_new", d1.ID, 0); b.DeviceID != d2.ID {
		t.Fatalf("after the rebind a first-bind attempt sees %s, want %s", b.DeviceID, d2.ID)
	}
}

// A new binding past the owner's limit is refused ErrSessionLimit, by bind
// and by rebind; bindings held keep working, other owners are not
// counted, and a deleted binding frees its place.
func testSessionLimit(t *testing.T, s Backend) {
	alice, bob := newIdentity(t, s, "alice"), newIdentity(t, s, "bob")
	da, db := register(t, s, alice.ID), register(t, s, bob.ID)
	for _, id := range []string{"rs_1", "rs_2"} {
		if _, err := s.BindSession(ctx(t), alice.ID, id, da.ID, 2); err != nil {
			t.Fatalf("bind %s under the limit: %v", id, err)
		}
	}
	if _, err := s.BindSession(ctx(t), alice.ID, "rs_3", da.ID, 2); !errors.Is(err, store.ErrSessionLimit) {
		t.Fatalf("a third binding with a limit of 2: err = %v, want ErrSessionLimit", err)
	}
	if _, err := s.RebindSession(ctx(t), alice.ID, "rs_3", da.ID, 2); !errors.Is(err, store.ErrSessionLimit) {
		t.Fatalf("a third binding by rebind: err = %v, want ErrSessionLimit", err)
	}
	if _, err := s.Session(ctx(t), alice.ID, "rs_3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused binding exists: %v", err)
	}
	if b, err := s.BindSession(ctx(t), alice.ID, "rs_1", da.ID, 2); err != nil || b.DeviceID != da.ID {
		t.Fatalf("a binding held, at the limit: %+v, %v", b, err)
	}
	if _, err := s.BindSession(ctx(t), bob.ID, "rs_3", db.ID, 2); err != nil {
		t.Fatalf("another owner's binding: %v", err)
	}
	if err := s.DeleteSession(ctx(t), alice.ID, "rs_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx(t), alice.ID, "rs_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting it twice: err = %v, want ErrNotFound", err)
	}
	if _, err := s.BindSession(ctx(t), alice.ID, "rs_3", da.ID, 2); err != nil {
		t.Fatalf("a binding after one was deleted: %v", err)
	}
}

// A binding's use is recorded when the last one is SessionUseGranularity
// old; bindings unused for the expiry are pruned by the database clock,
// the others stay.
func testSessionsUnusedArePruned(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	for _, id := range []string{"rs_idle", "rs_used", "rs_fresh"} {
		if _, err := s.BindSession(ctx(t), alice.ID, id, d.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	back := (3 * store.SessionUseGranularity).Milliseconds()
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE sessions SET used_ms = used_ms - `+fmt.Sprint(back)+` WHERE root_session_id IN ('rs_idle', 'rs_used')`); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Session(ctx(t), alice.ID, "rs_used")
	if _, err := s.BindSession(ctx(t), alice.ID, "rs_used", d.ID, 0); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.Session(ctx(t), alice.ID, "rs_used"); !after.UsedAt.After(before.UsedAt.Add(2 * store.SessionUseGranularity)) {
		t.Fatalf("a use %v after the last one recorded left it at %v", 3*store.SessionUseGranularity, after.UsedAt)
	}
	n, err := s.PruneSessions(ctx(t), 2*store.SessionUseGranularity)
	if err != nil || n != 1 {
		t.Fatalf("PruneSessions = %d, %v; want 1", n, err)
	}
	if _, err := s.Session(ctx(t), alice.ID, "rs_idle"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the idle binding: err = %v, want pruned", err)
	}
	for _, id := range []string{"rs_used", "rs_fresh"} {
		if _, err := s.Session(ctx(t), alice.ID, id); err != nil {
			t.Fatalf("%s: %v, want kept", id, err)
		}
	}
}
