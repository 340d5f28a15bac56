package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// L.1: a replica has a row with the URL its peers reach it at and a
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
