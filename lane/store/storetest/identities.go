package storetest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

func newAPIKey(t *testing.T, s Backend, identityID string) (store.APIKey, string) {
	t.Helper()
	plain := "sema_" + rand.Text()
	k, err := s.CreateAPIKey(ctx(t), identityID, store.DigestOf(plain))
	if err != nil {
		t.Fatal(err)
	}
	return k, plain
}

// the admin is a mark on an identity; CreateIdentity never sets
// it; ListIdentities is every identity, oldest first.
func testAdminIsAMarkOnAnIdentity(t *testing.T, s Backend) {
	admin, err := s.CreateAdminIdentity(ctx(t), "admin")
	if err != nil || !admin.Admin || admin.Name != "admin" || !strings.HasPrefix(admin.ID, "idn_") || admin.CreatedAt.IsZero() {
		t.Fatalf("CreateAdminIdentity = %+v, %v", admin, err)
	}
	bob := newIdentity(t, s, "bob")
	if bob.Admin {
		t.Fatal("CreateIdentity made an admin")
	}
	_, key := newAPIKey(t, s, admin.ID)
	if got, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(key)); err != nil || !got.Admin || got.ID != admin.ID {
		t.Fatalf("IdentityByAPIKey(the admin's key) = %+v, %v; want the admin, marked", got, err)
	}
	all, err := s.ListIdentities(ctx(t))
	want := []store.Identity{admin, bob}
	if listedFirst(bob.CreatedAt, bob.ID, admin.CreatedAt, admin.ID) {
		want[0], want[1] = bob, admin
	}
	if err != nil || len(all) != 2 || all[0].ID != want[0].ID || all[0].Admin != want[0].Admin || all[1].ID != want[1].ID || all[1].Admin != want[1].Admin {
		t.Fatalf("ListIdentities = %+v, %v; want %s then %s, the admin marked", all, err, want[0].Name, want[1].Name)
	}
}

// a key has an id, a creation time, and no use before its first.
func testAPIKeysHaveIDsAndAreListedPerIdentity(t *testing.T, s Backend) {
	alice, bob := newIdentity(t, s, "alice"), newIdentity(t, s, "bob")
	k1, _ := newAPIKey(t, s, alice.ID)
	k2, _ := newAPIKey(t, s, alice.ID)
	newAPIKey(t, s, bob.ID)
	if len(k1.ID) != 30 || !strings.HasPrefix(k1.ID, "key_") || k1.ID == k2.ID {
		t.Fatalf("key ids %q, %q: want distinct key_<26-char ULID>", k1.ID, k2.ID)
	}
	if k1.IdentityID != alice.ID || k1.CreatedAt.IsZero() || k1.LastUsedAt != nil || k1.RevokedAt != nil {
		t.Fatalf("new key = %+v", k1)
	}
	got, err := s.ListAPIKeys(ctx(t), alice.ID)
	if listedFirst(k2.CreatedAt, k2.ID, k1.CreatedAt, k1.ID) {
		k1, k2 = k2, k1
	}
	if err != nil || len(got) != 2 || got[0].ID != k1.ID || got[1].ID != k2.ID {
		t.Fatalf("alice's keys = %+v, %v; want %s, %s", got, err, k1.ID, k2.ID)
	}
	if none, err := s.ListAPIKeys(ctx(t), "idn_nobody"); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("an unknown identity's keys = %#v, %v; want an empty list", none, err)
	}
}

// "a revoked key is refused at once"; revoking is per owner (an
// owner "" is the admin's right to revoke any), and a second revoke is a
// no-op.
func testARevokedKeyIsRefusedAtOnce(t *testing.T, s Backend) {
	alice, bob := newIdentity(t, s, "alice"), newIdentity(t, s, "bob")
	k, plain := newAPIKey(t, s, alice.ID)
	newAPIKey(t, s, alice.ID)
	if _, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(plain)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeAPIKey(ctx(t), bob.ID, k.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob revoking alice's key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.RevokeAPIKey(ctx(t), alice.ID, "key_01J8ZQ4T9X0000000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking an unknown key: err = %v, want ErrNotFound", err)
	}
	r, err := s.RevokeAPIKey(ctx(t), alice.ID, k.ID)
	if err != nil || r.RevokedAt == nil || r.ID != k.ID {
		t.Fatalf("revoke = %+v, %v", r, err)
	}
	if _, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(plain)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the revoked key: err = %v, want ErrNotFound at once", err)
	}
	again, err := s.RevokeAPIKey(ctx(t), "", k.ID)
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*r.RevokedAt) {
		t.Fatalf("a second revoke = %+v, %v; want a no-op keeping %v", again, err, r.RevokedAt)
	}
	if live, _ := s.ListAPIKeys(ctx(t), alice.ID); len(live) != 1 || live[0].ID == k.ID {
		t.Fatalf("alice's keys after the revoke = %+v; want only the other one", live)
	}
	// A non-admin may revoke its last key.
	bk, _ := newAPIKey(t, s, bob.ID)
	if _, err := s.RevokeAPIKey(ctx(t), bob.ID, bk.ID); err != nil {
		t.Fatalf("bob revoking his last key: %v", err)
	}
}

// the lane is never left without an admin key: of two concurrent
// revokes of the admin's last two keys, exactly one passes.
func testTheAdminsLastKeyIsNeverRevoked(t *testing.T, s Backend) {
	admin, err := s.CreateAdminIdentity(ctx(t), "admin")
	if err != nil {
		t.Fatal(err)
	}
	only, _ := newAPIKey(t, s, admin.ID)
	if _, err := s.RevokeAPIKey(ctx(t), admin.ID, only.ID); !errors.Is(err, store.ErrLastAdminKey) {
		t.Fatalf("revoking the admin's only key: err = %v, want ErrLastAdminKey", err)
	}
	second, _ := newAPIKey(t, s, admin.ID)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, k := range []store.APIKey{only, second} {
		wg.Go(func() { _, errs[i] = s.RevokeAPIKey(ctx(t), "", k.ID) })
	}
	wg.Wait()
	passed, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			passed++
		case errors.Is(err, store.ErrLastAdminKey):
			refused++
		default:
			t.Fatalf("concurrent revoke: %v", err)
		}
	}
	live, _ := s.ListAPIKeys(ctx(t), admin.ID)
	if passed != 1 || refused != 1 || len(live) != 1 {
		t.Fatalf("%d revokes passed, %d refused, %d keys left; want 1, 1, 1", passed, refused, len(live))
	}
}

// lastUsedAt is written at most once a minute per key, not per
// request: a use within the minute of the last recorded one writes nothing.
func testKeyUseIsRecordedAtMostOnceAMinute(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	k, plain := newAPIKey(t, s, alice.ID)
	use := func() {
		t.Helper()
		if _, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(plain)); err != nil {
			t.Fatal(err)
		}
	}
	lastUsed := func() int64 {
		t.Helper()
		var ms int64
		if err := s.DB().QueryRowContext(ctx(t), fmt.Sprintf(`SELECT last_used_ms FROM api_keys WHERE id = '%s'`, k.ID)).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	setLastUsed := func(ms int64) {
		t.Helper()
		if _, err := s.DB().ExecContext(ctx(t), fmt.Sprintf(`UPDATE api_keys SET last_used_ms = %d WHERE id = '%s'`, ms, k.ID)); err != nil {
			t.Fatal(err)
		}
		// Written behind the store's back: a store that remembers keys
		// would otherwise answer from memory, as it may until the minute
		// it last recorded is over by its own clock.
		if f, ok := s.(interface{ ForgetAPIKeys() }); ok {
			f.ForgetAPIKeys()
		}
	}
	use()
	first := lastUsed()
	if keys, _ := s.ListAPIKeys(ctx(t), alice.ID); len(keys) != 1 || keys[0].LastUsedAt == nil || keys[0].LastUsedAt.UnixMilli() != first {
		t.Fatalf("after the first use: %+v; want lastUsedAt %d", keys, first)
	}
	// 30 s ago by the database clock: within the minute, nothing is written.
	setLastUsed(first - 30_000)
	use()
	use()
	if got := lastUsed(); got != first-30_000 {
		t.Fatalf("a use within the minute wrote last_used_ms %d (was %d)", got, first-30_000)
	}
	// 61 s ago: the next use is recorded.
	setLastUsed(first - 61_000)
	use()
	if got := lastUsed(); got < first {
		t.Fatalf("a use a minute after the last one left last_used_ms at %d, want >= %d", got, first)
	}
}

// listedFirst reports whether a row created at t1 with id1 comes before
// one created at t2 with id2 in a list "oldest first": by creation time,
// then by id. Rows made in the same millisecond, as a test makes them, are
// ordered by their ids' random parts, not by which was made first.
func listedFirst(t1 time.Time, id1 string, t2 time.Time, id2 string) bool {
	return t1.Before(t2) || t1.Equal(t2) && id1 < id2
}

// Replicas starting at once on an empty registry each ask for the admin:
// exactly one is made, and the others are told it exists.
func testConcurrentFirstStartsMakeOneAdmin(t *testing.T, s Backend) {
	const starts = 8
	var wg sync.WaitGroup
	errs := make([]error, starts)
	for i := range starts {
		wg.Go(func() { _, errs[i] = s.CreateAdminIdentity(ctx(t), "admin") })
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case !errors.Is(err, store.ErrAdminExists):
			t.Fatalf("a start failed otherwise: %v", err)
		}
	}
	idns, err := s.ListIdentities(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	admins := 0
	for _, idn := range idns {
		if idn.Admin {
			admins++
		}
	}
	if made != 1 || admins != 1 {
		t.Fatalf("%d starts made an admin, %d admins in the registry; want 1 and 1", made, admins)
	}
}

// An enrollment token names the identity it was issued to while it lives,
// and nothing once expired or unknown.
func testIdentityByEnrollToken(t *testing.T, s Backend) {
	alice, err := s.CreateIdentity(ctx(t), "alice")
	if err != nil {
		t.Fatal(err)
	}
	live, expired := store.DigestOf("set_live"), store.DigestOf("set_expired")
	if _, err := s.CreateEnrollToken(ctx(t), alice.ID, live, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateEnrollToken(ctx(t), alice.ID, expired, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the database's clock must pass the expiry
	if idn, err := s.IdentityByEnrollToken(ctx(t), live); err != nil || idn.ID != alice.ID {
		t.Fatalf("a live token: %+v, %v", idn, err)
	}
	for _, d := range []store.Digest{expired, store.DigestOf("set_unknown")} {
		if _, err := s.IdentityByEnrollToken(ctx(t), d); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an expired or unknown token: %v, want ErrNotFound", err)
		}
	}
}

// Names are unique; a disabled identity's keys are refused at once and
// work again once it is enabled; the admin is never disabled.
func testIdentityLifecycle(t *testing.T, s Backend) {
	alice, err := s.CreateIdentity(ctx(t), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIdentity(ctx(t), "alice"); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("a second alice: %v, want ErrNameTaken", err)
	}
	_, plain := newAPIKey(t, s, alice.ID)
	digest := store.DigestOf(plain)
	if _, err := s.IdentityByAPIKey(ctx(t), digest); err != nil {
		t.Fatal(err)
	}
	off, err := s.SetIdentityDisabled(ctx(t), alice.ID, true)
	if err != nil || off.DisabledAt == nil {
		t.Fatalf("disable: %+v %v", off, err)
	}
	if _, err := s.IdentityByAPIKey(ctx(t), digest); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a disabled identity's key: %v, want ErrNotFound", err)
	}
	on, err := s.SetIdentityDisabled(ctx(t), alice.ID, false)
	if err != nil || on.DisabledAt != nil {
		t.Fatalf("enable: %+v %v", on, err)
	}
	if _, err := s.IdentityByAPIKey(ctx(t), digest); err != nil {
		t.Fatalf("the key once enabled again: %v", err)
	}
	admin, err := s.CreateAdminIdentity(ctx(t), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetIdentityDisabled(ctx(t), admin.ID, true); !errors.Is(err, store.ErrAdminNotDisabled) {
		t.Fatalf("disabling the admin: %v", err)
	}
	if _, err := s.SetIdentityDisabled(ctx(t), "idn_none", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown identity: %v", err)
	}
}
