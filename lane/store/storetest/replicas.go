package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// A replica has a row with the URL its peers reach it at and a
// heartbeat by the database clock; a row whose heartbeat is older than the
// bound is listed, not live; draining is a mark; a removed replica's
// heartbeat is refused until it registers again.
func testReplicasHaveARowAndAHeartbeat(t *testing.T, s Backend) {
	if err := s.RegisterReplica(ctx(t), "rep_A", "http://10.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterReplica(ctx(t), "rep_B", "http://10.0.0.2:8080"); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListReplicas(ctx(t), time.Hour)
	if err != nil || len(all) != 2 {
		t.Fatalf("ListReplicas = %+v, %v; want both", all, err)
	}
	a := replicaNamed(t, all, "rep_A")
	if a.AdvertiseURL != "http://10.0.0.1:8080" || !a.Live || a.DrainingAt != nil || a.StartedAt.IsZero() || a.HeartbeatAt.Before(a.StartedAt) {
		t.Fatalf("rep_A = %+v; want live, not draining, reached at its URL", a)
	}

	// rep_B's heartbeat a minute old: stale under a 30 s bound, until it beats.
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE replicas SET heartbeat_ms = heartbeat_ms - 60000 WHERE id = 'rep_B'`); err != nil {
		t.Fatal(err)
	}
	all, _ = s.ListReplicas(ctx(t), 30*time.Second)
	if b := replicaNamed(t, all, "rep_B"); b.Live {
		t.Fatalf("rep_B = %+v; a heartbeat a minute old is live under a 30 s bound", b)
	}
	if a := replicaNamed(t, all, "rep_A"); !a.Live {
		t.Fatalf("rep_A = %+v; its fresh heartbeat is not live", a)
	}
	if err := s.HeartbeatReplica(ctx(t), "rep_B"); err != nil {
		t.Fatal(err)
	}
	all, _ = s.ListReplicas(ctx(t), 30*time.Second)
	if b := replicaNamed(t, all, "rep_B"); !b.Live {
		t.Fatalf("rep_B after its heartbeat = %+v; want live", b)
	}

	if err := s.MarkReplicaDraining(ctx(t), "rep_A"); err != nil {
		t.Fatal(err)
	}
	all, _ = s.ListReplicas(ctx(t), time.Hour)
	if a := replicaNamed(t, all, "rep_A"); a.DrainingAt == nil {
		t.Fatalf("rep_A after MarkReplicaDraining = %+v; want draining", a)
	}
	// Registering again (a restart with the same id) clears the mark.
	if err := s.RegisterReplica(ctx(t), "rep_A", "http://10.0.0.9:8080"); err != nil {
		t.Fatal(err)
	}
	all, _ = s.ListReplicas(ctx(t), time.Hour)
	if a := replicaNamed(t, all, "rep_A"); a.DrainingAt != nil || a.AdvertiseURL != "http://10.0.0.9:8080" || len(all) != 2 {
		t.Fatalf("rep_A registered again = %+v (of %d); want one row, not draining, at its new URL", a, len(all))
	}

	if err := s.RemoveReplica(ctx(t), "rep_A"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveReplica(ctx(t), "rep_A"); err != nil {
		t.Fatalf("removing a removed replica: %v; want a no-op", err)
	}
	for name, call := range map[string]func() error{
		"HeartbeatReplica":    func() error { return s.HeartbeatReplica(ctx(t), "rep_A") },
		"MarkReplicaDraining": func() error { return s.MarkReplicaDraining(ctx(t), "rep_A") },
	} {
		if err := call(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of a removed replica: %v; want ErrNotFound", name, err)
		}
	}
	if all, _ := s.ListReplicas(ctx(t), time.Hour); len(all) != 1 || all[0].ID != "rep_B" {
		t.Fatalf("after removing rep_A: %+v; want rep_B alone", all)
	}
	if err := s.RegisterReplica(ctx(t), "", "http://x"); err == nil {
		t.Error("a replica with no id was registered")
	}
	if err := s.RegisterReplica(ctx(t), "rep_C", ""); err == nil {
		t.Error("a replica with no advertise URL was registered")
	}
}

// The rows of replicas dead for longer than the bound are pruned,
// and only those.
func testReplicasDeadLongArePruned(t *testing.T, s Backend) {
	for _, id := range []string{"rep_live", "rep_dead", "rep_recent"} {
		if err := s.RegisterReplica(ctx(t), id, "http://"+id+":8080"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE replicas SET heartbeat_ms = heartbeat_ms - 7200000 WHERE id = 'rep_dead'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE replicas SET heartbeat_ms = heartbeat_ms - 60000 WHERE id = 'rep_recent'`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneReplicas(ctx(t), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneReplicas = %d, %v; want the one dead for two hours", n, err)
	}
	all, _ := s.ListReplicas(ctx(t), time.Hour)
	if len(all) != 2 || replicaNamed(t, all, "rep_live").ID == "" || replicaNamed(t, all, "rep_recent").ID == "" {
		t.Fatalf("after pruning: %+v; want rep_live and rep_recent", all)
	}
}

func replicaNamed(t *testing.T, all []store.Replica, id string) store.Replica {
	t.Helper()
	for _, r := range all {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no replica %s in %+v", id, all)
	return store.Replica{}
}

// The registry's presence: a device row says whether a live lease is
// held on it and by which replica, by the database clock; a refused lease
// names the holder that keeps it, and its replica.
func testADeviceRowTellsItsLiveLeaseAndReplica(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	if got, _ := s.Device(ctx(t), d.ID); got.Leased || got.LeaseReplica != "" {
		t.Fatalf("a device never connected = %+v; want no lease", got)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c1", Epoch: "E1", Replica: "rep_A", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Device(ctx(t), d.ID)
	if err != nil || !got.Leased || got.LeaseReplica != "rep_A" || got.Generation != 1 {
		t.Fatalf("leased device = %+v, %v; want leased by rep_A at gen 1", got, err)
	}
	page, err := s.ListDevices(ctx(t), alice.ID, store.DevicePage{Limit: 10})
	if err != nil || len(page) != 1 || !page[0].Leased || page[0].LeaseReplica != "rep_A" {
		t.Fatalf("listed = %+v, %v; want the lease of rep_A", page, err)
	}
	held, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c2", Epoch: "E1", Replica: "rep_B", TTL: time.Minute})
	if !errors.Is(err, store.ErrLeaseHeld) || held.Previous != "c1" || held.PreviousReplica != "rep_A" || held.PreviousEpoch != "E1" {
		t.Fatalf("refused lease = %+v, %v; want ErrLeaseHeld naming c1 of rep_A", held, err)
	}
	// Expired by the database clock: no longer a live lease.
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE devices SET lease_expires_ms = lease_expires_ms - 120000`); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Device(ctx(t), d.ID); got.Leased || got.LeaseReplica != "" {
		t.Fatalf("device with an expired lease = %+v; want none live", got)
	}
	if _, err := s.AcquireLease(ctx(t), store.LeaseRequest{DeviceID: d.ID, Holder: "c3", Epoch: "E1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Device(ctx(t), d.ID); !got.Leased || got.LeaseReplica != "" {
		t.Fatalf("leased without a replica = %+v; want leased, no replica named", got)
	}
	if err := s.ReleaseLease(ctx(t), d.ID, "c3"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Device(ctx(t), d.ID); got.Leased {
		t.Fatalf("released = %+v; want no lease", got)
	}
}

// The first cluster secret stored is every replica's, also when
// replicas start at once.
func testTheClusterSecretIsTheFirstOneStored(t *testing.T, s Backend) {
	if _, err := s.ClusterSecrets(ctx(t), ""); err == nil {
		t.Fatal("an empty candidate was accepted")
	}
	got := make([]string, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			secrets, err := s.ClusterSecrets(ctx(t), fmt.Sprintf("secret-%d", i))
			if err != nil {
				t.Error(err)
			}
			got[i] = secrets.Current
		})
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] || !strings.HasPrefix(g, "secret-") {
			t.Fatalf("concurrent first calls answered %q; want one stored candidate", got)
		}
	}
	if again, err := s.ClusterSecrets(ctx(t), "later"); err != nil || again.Current != got[0] || again.Previous != "" {
		t.Fatalf("a later call = %+v, %v; want the stored %q, never rotated", again, err, got[0])
	}
}

// A rotation makes the new secret current and keeps the one it replaced,
// with the rotation's age by the database clock; a registry with no
// secret has nothing to rotate.
func testTheClusterSecretRotates(t *testing.T, s Backend) {
	next := strings.Repeat("n", 43)
	if err := s.RotateClusterSecret(ctx(t), next); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rotating before any secret: err = %v, want ErrNotFound", err)
	}
	first, err := s.ClusterSecrets(ctx(t), strings.Repeat("f", 43))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RotateClusterSecret(ctx(t), "short"); err == nil {
		t.Fatal("a secret of 5 bytes was accepted")
	}
	if err := s.RotateClusterSecret(ctx(t), next); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE cluster_secret SET rotated_ms = rotated_ms - 90000`); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClusterSecrets(ctx(t), "a candidate is never stored over a secret")
	if err != nil || got.Current != next || got.Previous != first.Current || got.RotatedAgo < 90*time.Second || got.RotatedAgo > time.Hour {
		t.Fatalf("after the rotation: %+v, %v; want %q, previous %q, rotated about 90 s ago", got, err, next, first.Current)
	}
}
