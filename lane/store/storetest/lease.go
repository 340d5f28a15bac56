package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

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

// A replica shutting down drops every lease it holds in one
// statement, 10,000 here; the leases of another replica, and one another
// replica took over from it, are untouched.
func testReleaseReplicaLeases(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	const n = 10000
	devices := manyDevices(t, s, alice.ID, n+2)
	mine, theirs, takenOver := devices[:n], devices[n], devices[n+1]
	leaseAll(t, s, mine, "rep_A")
	leaseAll(t, s, []string{theirs}, "rep_B")
	takeOverFromA(t, s, takenOver)
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

// takeOverFromA has rep_A lease device as rep_A/old, then rep_B take it
// over as rep_B/new.
func takeOverFromA(t *testing.T, s Backend, device string) {
	t.Helper()
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: device, Holder: "rep_A/old", Epoch: "E", Replica: "rep_A", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: device, Holder: "rep_B/new", Epoch: "E", Replica: "rep_B", TTL: time.Hour, Takeover: "rep_A/old"}); err != nil {
		t.Fatal(err)
	}
}

// A replica renews every lease it holds in one statement, 10,000
// here, and learns which it still holds; a lease another replica took over
// is neither renewed nor reported, and an expired lease of its own is
// renewed (no one took it).
func testRenewReplicaLeases(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	const n = 10000
	devices := manyDevices(t, s, alice.ID, n+3)
	mine, theirs, takenOver, expired := devices[:n], devices[n], devices[n+1], devices[n+2]
	leaseAll(t, s, mine, "rep_A")
	leaseAll(t, s, []string{theirs}, "rep_B")
	takeOverFromA(t, s, takenOver)
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: expired, Holder: "rep_A/expired", Epoch: "E", Replica: "rep_A", TTL: 0}); err != nil {
		t.Fatal(err)
	}
	held, err := s.RenewReplicaLeases(ctx(t), "rep_A", time.Hour)
	if err != nil || len(held) != n+1 {
		t.Fatalf("RenewReplicaLeases = %d leases, %v; want %d", len(held), err, n+1)
	}
	want := map[string]string{expired: "rep_A/expired"}
	for i, d := range mine {
		want[d] = fmt.Sprintf("rep_A/%d", i)
		if i >= 100 { // leaseAll's bulk rows are named by device id
			want[d] = "rep_A/" + d
		}
	}
	for _, l := range held {
		if want[l.DeviceID] != l.Holder {
			t.Fatalf("renewed %s held by %q, want %q", l.DeviceID, l.Holder, want[l.DeviceID])
		}
		delete(want, l.DeviceID)
	}
	if len(want) != 0 {
		t.Fatalf("%d leases of rep_A were not renewed", len(want))
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: expired, Holder: "rep_C/1", Epoch: "E", Replica: "rep_C", TTL: time.Minute}); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("the renewed lease was free to take: err = %v, want ErrLeaseHeld", err)
	}
	if _, err := s.RenewLease(ctx(t), takenOver, "rep_B/new", time.Minute); err != nil {
		t.Fatalf("the lease taken over from rep_A was touched: %v", err)
	}
	if _, err := s.RenewReplicaLeases(ctx(t), "", time.Hour); err == nil {
		t.Error("renewing the leases of no replica did not fail")
	}
}

// A batch of lease requests is decided in one transaction, each as
// AcquireLease would decide it alone, the answers in the requests' order;
// two requests for one device are decided one after the other.
func testAcquireLeasesDecidesEachRequest(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	free, held, revoked, twice := register(t, s, alice.ID), register(t, s, alice.ID), register(t, s, alice.ID), register(t, s, alice.ID)
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: held.ID, Holder: "other", Epoch: "E", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeDevice(ctx(t), alice.ID, revoked.ID); err != nil {
		t.Fatal(err)
	}
	req := func(device, holder, takeover string) store.LeaseRequest {
		return store.LeaseRequest{DeviceID: device, Holder: holder, Epoch: "E", Replica: "rep_A", TTL: time.Minute, Takeover: takeover}
	}
	out, err := s.AcquireLeases(ctx(t), []store.LeaseRequest{
		req(twice.ID, "t1", ""),
		req(held.ID, "h1", ""),
		req("dev_01J8ZQ4T9X0000000000000000", "u1", ""),
		req(free.ID, "f1", ""),
		req(revoked.ID, "r1", ""),
		req(twice.ID, "t2", ""),   // t1's lease is live: refused
		req(twice.ID, "t3", "t1"), // names t1 as stale: takes it
	})
	if err != nil || len(out) != 7 {
		t.Fatalf("AcquireLeases = %d outcomes, %v", len(out), err)
	}
	wantErr := []error{nil, store.ErrLeaseHeld, store.ErrNotFound, nil, store.ErrRevoked, store.ErrLeaseHeld, nil}
	for i, want := range wantErr {
		if !errors.Is(out[i].Err, want) || (want == nil) != (out[i].Err == nil) {
			t.Errorf("request %d: err = %v, want %v", i, out[i].Err, want)
		}
	}
	if out[0].Lease.Gen != 1 || out[3].Lease.Gen != 1 || out[6].Lease.Gen != 2 || out[6].Lease.Previous != "t1" {
		t.Fatalf("leases: %+v, %+v, %+v; want gen 1, gen 1, gen 2 replacing t1", out[0].Lease, out[3].Lease, out[6].Lease)
	}
	if _, err := s.RenewLease(ctx(t), twice.ID, "t3", time.Minute); err != nil {
		t.Fatalf("the batch's last holder of a device does not hold it: %v", err)
	}
	if out, err := s.AcquireLeases(ctx(t), nil); err != nil || len(out) != 0 {
		t.Fatalf("an empty batch = %v, %v", out, err)
	}
}
