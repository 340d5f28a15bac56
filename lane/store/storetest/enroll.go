package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

func testIdentityByAPIKey(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	key := "sema_" + rand.Text()
	if _, err := s.CreateAPIKey(ctx(t), alice.ID, store.DigestOf(key)); err != nil {
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
	if _, err := s.CreateAPIKey(ctx(t), alice.ID, store.DigestOf(apiKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateEnrollToken(ctx(t), alice.ID, store.DigestOf(token), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RegisterDevice(ctx(t), registration(store.DigestOf(token), alice.ID, newKey(t))); err != nil {
		t.Fatal(err)
	}
	s.Audit(ctx(t), store.AuditEvent{IdentityID: alice.ID, Event: "test"})
	for _, table := range []string{"identities", "api_keys", "enroll_tokens", "devices", "audit", "sessions"} {
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
	devices, err := s.ListDevices(ctx(t), alice.ID, store.DevicePage{})
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
		devices, _ := s.ListDevices(ctx(t), who.ID, store.DevicePage{})
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
	if devices, _ := s.ListDevices(ctx(t), alice.ID, store.DevicePage{}); len(devices) != 1 {
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
	if devices, _ := s.ListDevices(ctx(t), alice.ID, store.DevicePage{}); len(devices) != 1 {
		t.Fatalf("%d devices, want 1", len(devices))
	}
}

func testDevicesByOwner(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	bob := newIdentity(t, s, "bob")
	a1, a2 := register(t, s, alice.ID), register(t, s, alice.ID)
	b1 := register(t, s, bob.ID)
	got, err := s.ListDevices(ctx(t), alice.ID, store.DevicePage{})
	if listedFirst(a2.CreatedAt, a2.ID, a1.CreatedAt, a1.ID) {
		a1, a2 = a2, a1
	}
	if err != nil || len(got) != 2 || got[0].ID != a1.ID || got[1].ID != a2.ID {
		t.Fatalf("alice's devices = %+v, %v; want %s, %s in order", got, err, a1.ID, a2.ID)
	}
	if _, err := s.RevokeDevice(ctx(t), alice.ID, b1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("alice revoking bob's device: err = %v, want ErrNotFound", err)
	}
	if d, _ := s.Device(ctx(t), b1.ID); d.Revoked() {
		t.Fatal("bob's device was revoked by alice")
	}
	none, err := s.ListDevices(ctx(t), "idn_nobody", store.DevicePage{})
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("an unknown owner's devices = %#v, %v; want an empty list", none, err)
	}
}

func testADeviceIsRenamedByItsOwnerOnly(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	bob := newIdentity(t, s, "bob")
	d := register(t, s, alice.ID)
	if _, err := s.RenameDevice(ctx(t), bob.ID, d.ID, "bobs"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob renaming alice's device: err = %v, want ErrNotFound", err)
	}
	if _, err := s.RenameDevice(ctx(t), alice.ID, "dev_none", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renaming no device: err = %v, want ErrNotFound", err)
	}
	r, err := s.RenameDevice(ctx(t), alice.ID, d.ID, "laptop")
	if err != nil || r.DisplayName != "laptop" || r.ID != d.ID {
		t.Fatalf("rename = %+v, %v; want %s named laptop", r, err, d.ID)
	}
	got, err := s.Device(ctx(t), d.ID)
	if err != nil || got.DisplayName != "laptop" || !got.CreatedAt.Equal(d.CreatedAt) || string(got.PublicKey) != string(d.PublicKey) {
		t.Fatalf("after rename the row is %+v, %v; want only its name changed", got, err)
	}
}

func testOnlyARevokedDeviceIsForgotten(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	bob := newIdentity(t, s, "bob")
	token := newToken(t, s, alice.ID, time.Minute)
	key := newKey(t)
	d, _, err := s.RegisterDevice(ctx(t), registration(token, alice.ID, key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BindSession(ctx(t), alice.ID, "root-1", d.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetDevice(ctx(t), alice.ID, d.ID); !errors.Is(err, store.ErrNotRevoked) {
		t.Fatalf("forgetting a live device: err = %v, want ErrNotRevoked", err)
	}
	if _, err := s.RevokeDevice(ctx(t), alice.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetDevice(ctx(t), bob.ID, d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob forgetting alice's device: err = %v, want ErrNotFound", err)
	}
	got, err := s.ForgetDevice(ctx(t), alice.ID, d.ID)
	if err != nil || got.ID != d.ID || !got.Revoked() {
		t.Fatalf("forget = %+v, %v; want %s as it was", got, err, d.ID)
	}
	if _, err := s.Device(ctx(t), d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the forgotten device is still read: err = %v", err)
	}
	if _, err := s.Session(ctx(t), alice.ID, "root-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session bound to the forgotten device stays: err = %v", err)
	}
	if _, _, err := s.RegisterDevice(ctx(t), registration(token, alice.ID, key)); refusal(err) != store.RefusedUnknownToken {
		t.Errorf("replaying the forgotten device's token: err = %v, want the unknown-token refusal", err)
	}
	if _, err := s.ForgetDevice(ctx(t), alice.ID, d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("forgetting it again: err = %v, want ErrNotFound", err)
	}

	// The admin ("") forgets any identity's revoked device.
	b := register(t, s, bob.ID)
	if _, err := s.RevokeDevice(ctx(t), bob.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetDevice(ctx(t), "", b.ID); err != nil {
		t.Fatalf("the admin forgetting bob's revoked device: %v", err)
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
