package lane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// renewalCounts counts the registry's lease renewals, and can hold a round
// inside its statement.
type renewalCounts struct {
	mu     sync.Mutex
	single int    // RenewLease calls
	rounds []int  // RenewReplicaLeases calls: the leases each renewed
	inside func() // runs after the statement, before the round returns
}

func (h *hookStore) RenewLease(ctx context.Context, deviceID, holder string, ttl time.Duration) (store.Lease, error) {
	h.renewals.mu.Lock()
	h.renewals.single++
	h.renewals.mu.Unlock()
	return h.Store.RenewLease(ctx, deviceID, holder, ttl)
}

func (h *hookStore) RenewReplicaLeases(ctx context.Context, replica string, ttl time.Duration) ([]store.HeldLease, error) {
	held, err := h.Store.RenewReplicaLeases(ctx, replica, ttl)
	h.renewals.mu.Lock()
	h.renewals.rounds = append(h.renewals.rounds, len(held))
	inside := h.renewals.inside
	h.renewals.mu.Unlock()
	if inside != nil {
		inside()
	}
	return held, err
}

// renewalTTL is a lease TTL whose third no other timer of the lane uses,
// so that nextRound can wait for the renewer's own timer.
const renewalTTL = 51 * time.Second

func withRenewalTTL(c *Config) { c.LeaseTTL = renewalTTL }

// nextRound moves the clock to the next renewal round, once the renewer
// has armed its timer for it.
func nextRound(t *testing.T, l *wsLane) {
	t.Helper()
	if _, ok := l.clk.WaitTimer(t.Context(), func(d time.Duration) bool { return d == renewalTTL/3 }); !ok {
		t.Fatal("the renewer never armed its timer")
	}
	l.clk.Advance(renewalTTL / 3)
}

func (h *hookStore) renewalRounds() (single int, rounds []int) {
	h.renewals.mu.Lock()
	defer h.renewals.mu.Unlock()
	return h.renewals.single, append([]int(nil), h.renewals.rounds...)
}

// Heartbeats never write the registry; every lease of the replica is
// renewed in one statement per round, a third of the lease TTL (§1.4).
func TestHeartbeatsDoNotWriteTheRegistry(t *testing.T) {
	hooks := &hookStore{}
	l := newWSLane(t, withHooks(hooks), withRenewalTTL)
	a, b := l.enroll(), l.enroll()
	a.establish()
	b.establish()
	for seq := range 5 {
		a.send(&protocol.Heartbeat{Gen: a.gen, Seq: int64(seq)})
		b.send(&protocol.Heartbeat{Gen: b.gen, Seq: int64(seq)})
	}
	nextRound(t, l)
	eventually(t, "a renewal round ran", func() bool {
		_, rounds := hooks.renewalRounds()
		return len(rounds) == 1
	})
	single, rounds := hooks.renewalRounds()
	if single != 0 || rounds[0] != 2 {
		t.Fatalf("%d single renewals and a round of %d leases; want none and one round of both devices' leases", single, rounds[0])
	}
	for _, fd := range []*fakeDevice{a, b} {
		if st := l.connState(fd.id); st != connActive {
			t.Fatalf("device %s is %v after the round, want active", fd.id, st)
		}
	}
}

// A lease taken while a round's statement ran may be missing from its
// answer without being lost: the connection stays.
func TestALeaseTakenDuringARoundIsNotLost(t *testing.T) {
	hooks := &hookStore{}
	l := newWSLane(t, withHooks(hooks), withRenewalTTL)
	a, late := l.enroll(), l.enroll()
	a.establish()
	inStatement, proceed := make(chan struct{}), make(chan struct{})
	hooks.renewals.mu.Lock()
	hooks.renewals.inside = func() { close(inStatement); <-proceed }
	hooks.renewals.mu.Unlock()
	nextRound(t, l)
	<-inStatement
	late.establish()
	hooks.renewals.mu.Lock()
	hooks.renewals.inside = nil
	hooks.renewals.mu.Unlock()
	close(proceed)
	nextRound(t, l) // a second round: the first has ended
	eventually(t, "the second round ran", func() bool {
		_, rounds := hooks.renewalRounds()
		return len(rounds) == 2
	})
	if _, rounds := hooks.renewalRounds(); rounds[0] != 1 || rounds[1] != 2 {
		t.Fatalf("rounds renewed %v leases, want [1 2]", rounds)
	}
	if st := l.connState(late.id); st != connActive {
		t.Fatalf("the device that connected during the round is %v, want active", st)
	}
	if got := l.auditReasons(string(EventLeaseLost), late.id); len(got) != 0 {
		t.Fatalf("%d lease_lost rows for a lease that was never lost", len(got))
	}
}
