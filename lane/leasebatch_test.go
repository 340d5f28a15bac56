package lane

import (
	"slices"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// Handshakes that arrive while a batch of leases is written are decided
// together in the next one: one transaction for the lot, each answered
// with its own lease and generation.
func TestHandshakesWaitingForALeaseShareOneTransaction(t *testing.T) {
	hooks := &hookStore{}
	l := newWSLane(t, withHooks(hooks))
	first := l.enroll()
	waiting := make([]*fakeDevice, 5)
	for i := range waiting {
		waiting[i] = l.enroll()
	}
	release := holdHelloAtItsLease(hooks, first) // the writer is inside a batch
	for _, fd := range waiting {
		fd.dial()
		fd.send(fd.helloFrame())
	}
	eventually(t, "every hello to wait for the writer", func() bool { return l.srv.leases.pendingCount() == len(waiting) })
	release()
	first.expectHelloAck()
	gens := map[protocol.Gen]bool{}
	for _, fd := range waiting {
		gens[fd.expectHelloAck().Gen] = true
	}
	if len(gens) != 1 || !gens[1] {
		t.Fatalf("the waiting devices got generations %v; want each its own first", gens)
	}
	hooks.mu.Lock()
	batches := slices.Clone(hooks.leaseBatches)
	hooks.mu.Unlock()
	if !slices.Equal(batches, []int{1, len(waiting)}) {
		t.Fatalf("lease batches %v; want the first hello alone, then the %d that waited in one", batches, len(waiting))
	}
	for _, fd := range append(waiting, first) {
		fd.send(&protocol.GenerationAck{Gen: fd.gen})
	}
	for _, fd := range append(waiting, first) {
		eventually(t, "the device to be active", func() bool { return l.connState(fd.id) == connActive })
	}
}

// pendingCount is how many requests wait for the next batch.
func (b *leaseBatcher) pendingCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
