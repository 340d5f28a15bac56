package lane

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
)

// replicaCalls records the order of a replica's registry calls.
type replicaCalls struct {
	mu    sync.Mutex
	calls []string
}

func (h *hookStore) noteReplicaCall(name string) {
	h.replica.mu.Lock()
	h.replica.calls = append(h.replica.calls, name)
	h.replica.mu.Unlock()
}

func (h *hookStore) replicaCallsSoFar() []string {
	h.replica.mu.Lock()
	defer h.replica.mu.Unlock()
	return slices.Clone(h.replica.calls)
}

func (h *hookStore) MarkReplicaDraining(ctx context.Context, id string) error {
	h.noteReplicaCall("draining")
	return h.Store.MarkReplicaDraining(ctx, id)
}

func (h *hookStore) ReleaseReplicaLeases(ctx context.Context, replica string) (int64, error) {
	h.noteReplicaCall("release leases")
	return h.Store.ReleaseReplicaLeases(ctx, replica)
}

func (h *hookStore) RemoveReplica(ctx context.Context, id string) error {
	h.noteReplicaCall("remove")
	return h.Store.RemoveReplica(ctx, id)
}

const testAdvertiseURL = "http://10.0.0.7:8080"

func withAdvertiseURL(c *Config) { c.AdvertiseURL = testAdvertiseURL }

// thisReplica is the lane's row in the registry, if it has one.
func thisReplica(t *testing.T, l *wsLane) (store.Replica, bool) {
	t.Helper()
	all, err := l.store.ListReplicas(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.ID == l.srv.replica {
			return r, true
		}
	}
	return store.Replica{}, false
}

// A replica with an advertise URL has a row in the registry from New
// on, reached at that URL; a renewal round beats its heartbeat, and
// registers it again if the row went; Shutdown marks it draining first,
// releases its leases, and removes it last.
func TestAReplicaHasARegistryRowFromNewToShutdown(t *testing.T) {
	hooks := &hookStore{}
	l := newWSLane(t, withHooks(hooks), withRenewalTTL, withAdvertiseURL)
	r, ok := thisReplica(t, l)
	if !ok || r.AdvertiseURL != testAdvertiseURL || !r.Live || r.DrainingAt != nil {
		t.Fatalf("after New: %+v (found %v); want a live row at %s", r, ok, testAdvertiseURL)
	}

	if err := l.store.RemoveReplica(t.Context(), l.srv.replica); err != nil {
		t.Fatal(err)
	}
	nextRound(t, l)
	eventually(t, "the round to register the replica again", func() bool { _, ok := thisReplica(t, l); return ok })

	hooks.replica.mu.Lock()
	hooks.replica.calls = nil
	hooks.replica.mu.Unlock()
	if err := l.srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := hooks.replicaCallsSoFar(), []string{"draining", "release leases", "remove"}; !slices.Equal(got, want) {
		t.Fatalf("Shutdown's replica calls %q; want %q", got, want)
	}
	if r, ok := thisReplica(t, l); ok {
		t.Fatalf("after Shutdown the replica's row is still there: %+v", r)
	}
}

// Without an advertise URL (one replica alone) no row is written.
func TestAReplicaWithoutAnAdvertiseURLHasNoRow(t *testing.T) {
	l := newWSLane(t)
	if all, err := l.store.ListReplicas(t.Context(), time.Hour); err != nil || len(all) != 0 {
		t.Fatalf("replicas %+v, %v; want none", all, err)
	}
}

func TestNewRefusesAnAdvertiseURLPeersCannotDial(t *testing.T) {
	for _, bad := range []string{"10.0.0.7:8080", "ftp://10.0.0.7", "http://", "http://u:p@10.0.0.7", "http://10.0.0.7/?x=1", "http://[::1"} {
		_, err := New(Config{Store: newWSLane(t).store, AdvertiseURL: bad})
		if err == nil || !strings.Contains(err.Error(), "AdvertiseURL") {
			t.Errorf("AdvertiseURL %q: %v; want a refusal naming AdvertiseURL", bad, err)
		}
	}
}

// A rotation of the cluster secret is taken in phases of the lease TTL:
// first every replica verifies both while it signs with the previous one,
// then it signs with the new one and still verifies the previous, then
// only the new one is valid.
func TestHopKeysFollowTheRotationInPhases(t *testing.T) {
	const phase = 45 * time.Second
	cur, prev := "current", "previous"
	for _, tt := range []struct {
		name    string
		secrets store.ClusterSecrets
		sign    string
		verify  []string
	}{
		{"never rotated", store.ClusterSecrets{Current: cur}, cur, []string{cur}},
		{"just rotated", store.ClusterSecrets{Current: cur, Previous: prev}, prev, []string{prev, cur}},
		{"within the first phase", store.ClusterSecrets{Current: cur, Previous: prev, RotatedAgo: phase - time.Millisecond}, prev, []string{prev, cur}},
		{"the second phase", store.ClusterSecrets{Current: cur, Previous: prev, RotatedAgo: phase}, cur, []string{cur, prev}},
		{"the end of the second phase", store.ClusterSecrets{Current: cur, Previous: prev, RotatedAgo: 2*phase + cluster.HopWindow - time.Millisecond}, cur, []string{cur, prev}},
		{"done", store.ClusterSecrets{Current: cur, Previous: prev, RotatedAgo: 2*phase + cluster.HopWindow}, cur, []string{cur}},
		{"rotated to itself", store.ClusterSecrets{Current: cur, Previous: cur}, cur, []string{cur}},
	} {
		k := hopKeys(tt.secrets, phase)
		if k.Sign != tt.sign || !slices.Equal(k.Verify, tt.verify) {
			t.Errorf("%s: keys %+v, want sign %q verify %q", tt.name, k, tt.sign, tt.verify)
		}
	}
}
