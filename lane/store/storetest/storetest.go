// Package storetest is the one conformance suite every store.Store backend
// passes. A backend's test calls Run with a function that opens a fresh,
// empty store for one test.
package storetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// Backend is a store under test with its database handle, which the suite
// reads to prove what is and is not at rest.
type Backend interface {
	store.Store
	DB() *sql.DB
}

// Run runs the suite; open returns a fresh, empty store closed by t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Backend)
	}{
		{"IdentityByAPIKey", testIdentityByAPIKey},
		{"SecretsAreNeverStoredInPlaintext", testSecretsAreNeverStoredInPlaintext},
		{"EnrollTokenExpiresFromTheDatabaseClock", testEnrollTokenExpiry},
		{"RegisterDeviceFirstRegistration", testRegisterFirst},
		{"RegisterDeviceReplaySameKeyIsIndistinguishable", testRegisterReplay},
		{"RegisterDeviceRefusals", testRegisterRefusals},
		{"ConcurrentRegistrationDifferentKeysExactlyOneWins", testConcurrentDifferentKeys},
		{"ConcurrentRegistrationSameKeyOneRow", testConcurrentSameKey},
		{"DevicesAreSeenByTheirOwnerOnly", testDevicesByOwner},
		{"RevocationIsTerminal", testRevocationIsTerminal},
		{"LeaseAndGeneration", testLeaseAndGeneration},
		{"LeaseExpiresByTheDatabaseClock", testLeaseExpiry},
		{"ConcurrentLeaseAcquisitionOneWinner", testConcurrentLease},
		{"Audit", testAudit},
		{"AFullPoolWaitsAsLongAsTheCallersContext", testFullPoolWaits},
		{"ReleaseReplicaLeasesDrops10000InOneStatement", testReleaseReplicaLeases},
		{"AuditRowsCarryTheRemoteAddressAndACount", testAuditRemoteAndCount},
		{"AuditWrites15000RowsInOneCall", testAuditBatch},
		{"PruneAuditByTheDatabaseClock", testPruneAudit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func newIdentity(t *testing.T, s Backend, name string) store.Identity {
	t.Helper()
	idn, err := s.CreateIdentity(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return idn
}

func newKey(t *testing.T) []byte {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func newToken(t *testing.T, s Backend, identityID string, ttl time.Duration) store.Digest {
	t.Helper()
	d := store.DigestOf(fmt.Sprintf("set_token_%d_%s", time.Now().UnixNano(), rand.Text()))
	if _, err := s.CreateEnrollToken(ctx(t), identityID, d, ttl); err != nil {
		t.Fatal(err)
	}
	return d
}

func registration(token store.Digest, identityID string, key []byte) store.Registration {
	return store.Registration{
		TokenDigest: token, IdentityID: identityID, PublicKey: key,
		PlatformOS: "linux", PlatformArch: "amd64", DisplayName: "laptop", WorkspaceRoot: "/home/u/work",
	}
}

func register(t *testing.T, s Backend, identityID string) store.Device {
	t.Helper()
	d, _, err := s.RegisterDevice(ctx(t), registration(newToken(t, s, identityID, time.Minute), identityID, newKey(t)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func refusal(err error) store.EnrollRefusal {
	var re *store.EnrollRefusedError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

func testIdentityByAPIKey(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	key := "sema_" + rand.Text()
	if err := s.CreateAPIKey(ctx(t), alice.ID, store.DigestOf(key)); err != nil {
		t.Fatal(err)
	}
	got, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(key))
	if err != nil || got.ID != alice.ID || got.Name != "alice" {
		t.Fatalf("IdentityByAPIKey = %+v, %v; want alice", got, err)
	}
	if _, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(key+"x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: err = %v, want ErrNotFound", err)
	}
}

// §1.1: the server stores only a SHA-256 digest of a token; API keys alike.
func testSecretsAreNeverStoredInPlaintext(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	apiKey := "sema_" + rand.Text()
	token := "set_" + rand.Text()
	if err := s.CreateAPIKey(ctx(t), alice.ID, store.DigestOf(apiKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateEnrollToken(ctx(t), alice.ID, store.DigestOf(token), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RegisterDevice(ctx(t), registration(store.DigestOf(token), alice.ID, newKey(t))); err != nil {
		t.Fatal(err)
	}
	s.Audit(ctx(t), store.AuditEvent{IdentityID: alice.ID, Event: "test"})
	for _, table := range []string{"identities", "api_keys", "enroll_tokens", "devices", "audit"} {
		rows, err := s.DB().QueryContext(ctx(t), "SELECT * FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				b := []byte(fmt.Sprint(v))
				if raw, ok := v.([]byte); ok {
					b = raw
				}
				for _, secret := range []string{apiKey, token, token[4:], apiKey[5:]} {
					if bytes.Contains(b, []byte(secret)) {
						t.Errorf("%s.%s holds a secret in plaintext", table, cols[i])
					}
				}
			}
		}
		rows.Close()
	}
}

// §1.1: "Default lifetime 900 s, measured from the database clock."
func testEnrollTokenExpiry(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	before := time.Now()
	tok, err := s.CreateEnrollToken(ctx(t), alice.ID, store.DigestOf("set_"+rand.Text()), 900*time.Second)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// The database and this process share a host clock here; allow for
	// rounding to milliseconds.
	lo, hi := before.Add(900*time.Second-time.Second), after.Add(900*time.Second+time.Second)
	if tok.ExpiresAt.Before(lo) || tok.ExpiresAt.After(hi) {
		t.Errorf("ExpiresAt = %v, want 900 s after creation (%v .. %v)", tok.ExpiresAt, lo, hi)
	}
	// A zero lifetime is expired at once by the database's own comparison.
	expired := newToken(t, s, alice.ID, 0)
	_, _, err = s.RegisterDevice(ctx(t), registration(expired, alice.ID, newKey(t)))
	if refusal(err) != store.RefusedExpired {
		t.Fatalf("registering with an expired token: err = %v, want %s", err, store.RefusedExpired)
	}
}

func testRegisterFirst(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	key := newKey(t)
	r := registration(newToken(t, s, alice.ID, time.Minute), alice.ID, key)
	d, created, err := s.RegisterDevice(ctx(t), r)
	if err != nil || !created {
		t.Fatalf("first registration: created %v, %v", created, err)
	}
	if len(d.ID) != 30 || d.ID[:4] != "dev_" {
		t.Errorf("device id %q is not dev_<26-char ULID>", d.ID)
	}
	if d.OwnerID != alice.ID || !bytes.Equal(d.PublicKey, key) || d.PlatformOS != "linux" || d.PlatformArch != "amd64" ||
		d.DisplayName != "laptop" || d.WorkspaceRoot != "/home/u/work" || d.Revoked() || d.Generation != 0 || d.CreatedAt.IsZero() {
		t.Errorf("registered device = %+v", d)
	}
	got, err := s.Device(ctx(t), d.ID)
	if err != nil || got.ID != d.ID || !bytes.Equal(got.PublicKey, key) {
		t.Errorf("Device(%s) = %+v, %v", d.ID, got, err)
	}
	if _, err := s.Device(ctx(t), "dev_01J8ZQ4T9X0000000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown device: err = %v, want ErrNotFound", err)
	}
}

// §1.1: a replay of the same token with the same key is indistinguishable
// from the first registration: same device, no second row.
func testRegisterReplay(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	r := registration(newToken(t, s, alice.ID, time.Minute), alice.ID, newKey(t))
	first, _, err := s.RegisterDevice(ctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	again, created, err := s.RegisterDevice(ctx(t), r)
	if err != nil || again.ID != first.ID || created {
		t.Fatalf("replay = %+v, created %v, %v; want device %s, not created", again, created, err, first.ID)
	}
	devices, err := s.ListDevices(ctx(t), alice.ID)
	if err != nil || len(devices) != 1 {
		t.Fatalf("after a replay the owner has %d devices (%v), want 1", len(devices), err)
	}
}

// The four refusals of §1.1, told apart only by the audit reason.
func testRegisterRefusals(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	bob := newIdentity(t, s, "bob")
	used := newToken(t, s, alice.ID, time.Minute)
	if _, _, err := s.RegisterDevice(ctx(t), registration(used, alice.ID, newKey(t))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		r    store.Registration
		want store.EnrollRefusal
	}{
		{"unknown token", registration(store.DigestOf("set_nope"), alice.ID, newKey(t)), store.RefusedUnknownToken},
		{"expired token", registration(newToken(t, s, alice.ID, 0), alice.ID, newKey(t)), store.RefusedExpired},
		{"token of another identity", registration(newToken(t, s, alice.ID, time.Minute), bob.ID, newKey(t)), store.RefusedWrongIdentity},
		{"token used with another key", registration(used, alice.ID, newKey(t)), store.RefusedTokenReuse},
	}
	for _, tt := range tests {
		d, _, err := s.RegisterDevice(ctx(t), tt.r)
		if got := refusal(err); got != tt.want {
			t.Errorf("%s: err = %v, want refusal %s", tt.name, err, tt.want)
		}
		if d.ID != "" {
			t.Errorf("%s: a refusal returned device %s", tt.name, d.ID)
		}
	}
	for _, who := range []store.Identity{alice, bob} {
		devices, _ := s.ListDevices(ctx(t), who.ID)
		if who.ID == alice.ID && len(devices) != 1 || who.ID == bob.ID && len(devices) != 0 {
			t.Errorf("%s has %d devices after the refusals", who.Name, len(devices))
		}
	}
}

func testConcurrentDifferentKeys(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	token := newToken(t, s, alice.ID, time.Minute)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, reuses := 0, 0
	for range n {
		wg.Go(func() {
			_, _, err := s.RegisterDevice(context.Background(), registration(token, alice.ID, newKey(t)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case refusal(err) == store.RefusedTokenReuse:
				reuses++
			default:
				t.Errorf("concurrent registration: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || reuses != n-1 {
		t.Fatalf("%d wins and %d token_reuse refusals, want 1 and %d", wins, reuses, n-1)
	}
	if devices, _ := s.ListDevices(ctx(t), alice.ID); len(devices) != 1 {
		t.Fatalf("%d devices, want 1", len(devices))
	}
}

func testConcurrentSameKey(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	r := registration(newToken(t, s, alice.ID, time.Minute), alice.ID, newKey(t))
	const n = 8
	ids := make([]string, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, c, err := s.RegisterDevice(context.Background(), r)
			if err != nil {
				t.Errorf("concurrent replay: %v", err)
			}
			ids[i], created[i] = d.ID, c
		})
	}
	wg.Wait()
	if n := slices.Index(created, true); n < 0 || slices.Index(created[n+1:], true) >= 0 {
		t.Fatalf("created flags %v, want exactly one creation", created)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent replays returned different devices: %q", ids)
		}
	}
	if devices, _ := s.ListDevices(ctx(t), alice.ID); len(devices) != 1 {
		t.Fatalf("%d devices, want 1", len(devices))
	}
}

func testDevicesByOwner(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	bob := newIdentity(t, s, "bob")
	a1, a2 := register(t, s, alice.ID), register(t, s, alice.ID)
	b1 := register(t, s, bob.ID)
	got, err := s.ListDevices(ctx(t), alice.ID)
	if err != nil || len(got) != 2 || got[0].ID != a1.ID || got[1].ID != a2.ID {
		t.Fatalf("alice's devices = %+v, %v; want %s, %s in order", got, err, a1.ID, a2.ID)
	}
	if _, err := s.RevokeDevice(ctx(t), alice.ID, b1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("alice revoking bob's device: err = %v, want ErrNotFound", err)
	}
	if d, _ := s.Device(ctx(t), b1.ID); d.Revoked() {
		t.Fatal("bob's device was revoked by alice")
	}
	none, err := s.ListDevices(ctx(t), "idn_nobody")
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("an unknown owner's devices = %#v, %v; want an empty list", none, err)
	}
}

func testRevocationIsTerminal(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c1", Epoch: "E", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r1, err := s.RevokeDevice(ctx(t), alice.ID, d.ID)
	if err != nil || !r1.Revoked() {
		t.Fatalf("revoke = %+v, %v", r1, err)
	}
	r2, err := s.RevokeDevice(ctx(t), alice.ID, d.ID)
	if err != nil || !r2.RevokedAt.Equal(*r1.RevokedAt) {
		t.Fatalf("a second revoke changed the revocation: %v then %v (%v)", r1.RevokedAt, r2.RevokedAt, err)
	}
	if _, err := s.RenewLease(ctx(t), d.ID, "c1", time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing a revoked device's lease: err = %v, want ErrLeaseLost", err)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c2", Epoch: "E", TTL: time.Minute}); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("a revoked device took a lease: err = %v, want ErrRevoked", err)
	}
}

func testLeaseAndGeneration(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	l1, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c1", Epoch: "E1", TTL: time.Minute})
	if err != nil || l1.Gen != 1 || l1.Previous != "" {
		t.Fatalf("first lease = %+v, %v; want gen 1, no previous", l1, err)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c2", Epoch: "E1", TTL: time.Minute}); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("a second holder took a fresh lease: err = %v, want ErrLeaseHeld", err)
	}
	l2, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c2", Epoch: "E2", TTL: time.Minute, Takeover: "c1"})
	if err != nil || l2.Gen != 2 || l2.Previous != "c1" || l2.PreviousEpoch != "E1" {
		t.Fatalf("takeover = %+v, %v; want gen 2 replacing c1/E1", l2, err)
	}
	if _, err := s.RenewLease(ctx(t), d.ID, "c1", time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the superseded holder renewed: err = %v, want ErrLeaseLost", err)
	}
	r, err := s.RenewLease(ctx(t), d.ID, "c2", time.Minute)
	if err != nil || r.Gen != 2 || r.Epoch != "E2" {
		t.Fatalf("renew = %+v, %v", r, err)
	}
	if err := s.ReleaseLease(ctx(t), d.ID, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewLease(ctx(t), d.ID, "c2", time.Minute); err != nil {
		t.Fatalf("a stale holder's release dropped the current lease: %v", err)
	}
	if err := s.ReleaseLease(ctx(t), d.ID, "c2"); err != nil {
		t.Fatal(err)
	}
	l3, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c3", Epoch: "E2", TTL: time.Minute})
	if err != nil || l3.Gen != 3 {
		t.Fatalf("lease after release = %+v, %v; want gen 3", l3, err)
	}
	if got, _ := s.Device(ctx(t), d.ID); got.Generation != 3 {
		t.Fatalf("device generation = %d, want 3", got.Generation)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: "dev_01J8ZQ4T9X0000000000000000", Holder: "c", TTL: time.Minute}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown device lease: err = %v, want ErrNotFound", err)
	}
}

func testLeaseExpiry(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c1", Epoch: "E", TTL: 0}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c2", Epoch: "E", TTL: time.Minute})
	if err != nil || l.Previous != "c1" || l.Gen != 2 {
		t.Fatalf("taking an expired lease = %+v, %v", l, err)
	}
}

func testConcurrentLease(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var gens []uint64
	held := 0
	for i := range n {
		wg.Go(func() {
			l, err := s.AcquireLease(context.Background(), store.LeaseRequest{DeviceID: d.ID, Holder: fmt.Sprintf("c%d", i), Epoch: "E", TTL: time.Minute})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				gens = append(gens, l.Gen)
			case errors.Is(err, store.ErrLeaseHeld):
				held++
			default:
				t.Errorf("concurrent lease: %v", err)
			}
		})
	}
	wg.Wait()
	if len(gens) != 1 || held != n-1 || gens[0] != 1 {
		t.Fatalf("winners' generations %v and %d refusals, want one winner at gen 1", gens, held)
	}
}

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

// waitUntil polls cond, bounded: reaching the bound fails the test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// H.5: the pool that writes is bounded, and a caller that finds it full
// waits for a connection as long as its own context allows: it never fails
// for want of one, and never opens another.
func testFullPoolWaits(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	db := s.DB()
	size := db.Stats().MaxOpenConnections
	if size == 0 {
		t.Fatal("the pool is unbounded")
	}
	var held []*sql.Conn
	for range size {
		c, err := db.Conn(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	waits := db.Stats().WaitCount
	patient := make(chan error, 1)
	go func() {
		_, err := s.AcquireLease(context.Background(), store.LeaseRequest{DeviceID: d.ID, Holder: "c1", Epoch: "E", TTL: time.Minute})
		patient <- err
	}()
	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := s.RenewLease(impatient, d.ID, "c1", time.Minute)
		gaveUp <- err
	}()
	waitUntil(t, "both callers wait for a connection", func() bool { return db.Stats().WaitCount >= waits+2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiting caller whose context ended: err = %v, want context.Canceled", err)
	}
	for _, c := range held {
		c.Close()
	}
	if err := <-patient; err != nil {
		t.Fatalf("a caller that waited for the pool failed: %v", err)
	}
	if open := db.Stats().OpenConnections; open > size {
		t.Fatalf("%d connections open, over the pool's %d", open, size)
	}
}

// manyDevices adds n devices, copies of one registered device, in one
// statement: the registration path is tested above, and n of them one by
// one would be most of the suite's time.
func manyDevices(t *testing.T, s Backend, owner string, n int) []string {
	t.Helper()
	model := register(t, s, owner)
	_, err := s.DB().ExecContext(ctx(t), fmt.Sprintf(`WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < %d)
		INSERT INTO devices (id, owner_id, pubkey, platform_os, platform_arch, display_name, workspace_root, created_ms, generation)
		SELECT 'dev_MANY' || n, d.owner_id, d.pubkey, d.platform_os, d.platform_arch, d.display_name, d.workspace_root, d.created_ms, 0
		FROM seq, devices d WHERE d.id = '%s'`, n, model.ID))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("dev_MANY%d", i+1)
	}
	return ids
}

// leaseAll takes every device's lease for replica, holder "<replica>/<i>":
// the first 100 through AcquireLease, from a few goroutines, and the rest
// by one statement writing the columns AcquireLease writes (10,000 of them
// one by one take 20 s under the race detector on SQLite).
func leaseAll(t *testing.T, s Backend, devices []string, replica string) {
	t.Helper()
	const acquired = 100
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < min(len(devices), acquired); i += 8 {
				_, err := s.AcquireLease(context.Background(), store.LeaseRequest{DeviceID: devices[i],
					Holder: fmt.Sprintf("%s/%d", replica, i), Epoch: "E", Replica: replica, TTL: time.Hour})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("taking a lease: %v", err)
	}
	if len(devices) <= acquired {
		return
	}
	rest := "'" + strings.Join(devices[acquired:], "', '") + "'"
	_, err := s.DB().ExecContext(ctx(t), fmt.Sprintf(`UPDATE devices SET generation = generation + 1, lease_holder = '%s/' || id,
		lease_epoch = 'E', lease_replica = '%s', lease_expires_ms = created_ms + 86400000000 WHERE id IN (%s)`, replica, replica, rest))
	if err != nil {
		t.Fatal(err)
	}
}

func leasesHeld(t *testing.T, s Backend) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRowContext(ctx(t), `SELECT count(*) FROM devices WHERE lease_holder IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// H.7: a replica shutting down drops every lease it holds in one
// statement, 10,000 here; the leases of another replica, and one another
// replica took over from it, are untouched.
func testReleaseReplicaLeases(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	const n = 10000
	devices := manyDevices(t, s, alice.ID, n+2)
	mine, theirs, takenOver := devices[:n], devices[n], devices[n+1]
	leaseAll(t, s, mine, "rep_A")
	leaseAll(t, s, []string{theirs}, "rep_B")
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: takenOver, Holder: "rep_A/old", Epoch: "E", Replica: "rep_A", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: takenOver, Holder: "rep_B/new", Epoch: "E", Replica: "rep_B", TTL: time.Hour, Takeover: "rep_A/old"}); err != nil {
		t.Fatal(err)
	}
	released, err := s.ReleaseReplicaLeases(ctx(t), "rep_A")
	if err != nil || released != n {
		t.Fatalf("ReleaseReplicaLeases = %d, %v; want %d", released, err, n)
	}
	if held := leasesHeld(t, s); held != 2 {
		t.Fatalf("%d leases held after the release, want 2 (the other replica's)", held)
	}
	for _, l := range []struct{ device, holder string }{{theirs, "rep_B/0"}, {takenOver, "rep_B/new"}} {
		if _, err := s.RenewLease(ctx(t), l.device, l.holder, time.Minute); err != nil {
			t.Errorf("another replica's lease on %s was touched: %v", l.device, err)
		}
	}
	// A released device's lease is free for anyone, with no takeover.
	for _, d := range []string{mine[0], mine[n-1]} {
		if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d, Holder: "rep_C/1", Epoch: "E", Replica: "rep_C", TTL: time.Minute}); err != nil {
			t.Errorf("a released lease on %s: %v", d, err)
		}
	}
	if again, err := s.ReleaseReplicaLeases(ctx(t), "rep_A"); err != nil || again != 0 {
		t.Errorf("a second release = %d, %v; want 0", again, err)
	}
	if _, err := s.ReleaseReplicaLeases(ctx(t), ""); err == nil {
		t.Error("releasing the leases of no replica did not fail")
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

// H.8: a refusal row names the address it came from and how many
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

// H.8: the auditor writes its queue in batches: one call, one transaction,
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

// H.8: retention is measured by the database clock: rows are aged here by
// moving their database timestamps back, and PruneAudit compares them with
// the database's now. The events in keep are never pruned.
func testPruneAudit(t *testing.T, s Backend) {
	for _, e := range []string{"old", "old", "recent", "server.admin_created"} {
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
	n, err := s.PruneAudit(ctx(t), time.Hour, []string{"server.admin_created"})
	if err != nil || n != 2 {
		t.Fatalf("PruneAudit = %d, %v; want the 2 old rows", n, err)
	}
	if left := auditCount(t, s, ``); left != 2 || auditCount(t, s, `WHERE event = 'old'`) != 0 {
		t.Fatalf("%d rows left, want recent and server.admin_created", left)
	}
	if n, err := s.PruneAudit(ctx(t), time.Hour, nil); err != nil || n != 1 {
		t.Fatalf("PruneAudit without keep = %d, %v; want the kept row too", n, err)
	}
	if _, err := s.PruneAudit(ctx(t), 0, nil); err == nil {
		t.Fatal("a zero retention was accepted")
	}
}
