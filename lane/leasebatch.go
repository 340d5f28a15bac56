package lane

import (
	"context"
	"sync"

	"github.com/sema-agent/sema/lane/store"
)

// leaseBatchMax is the most lease requests one transaction decides.
const leaseBatchMax = 256

// leaseBatcher takes the leases of the replica's handshakes (§1.4) in
// batches, one transaction each, as a database commits a group: while one
// batch is written the next gathers. A lone handshake waits for no one; a
// burst of 15,000 devices reconnecting at once costs a few hundred commits
// instead of 15,000, and the registry's single writer
// stops being the queue the burst waits in.
//
// One goroutine writes while requests are pending and ends when none are;
// wait waits for it (Shutdown).
type leaseBatcher struct {
	store store.Store

	mu      sync.Mutex
	pending []leaseWait
	busy    bool // a drain goroutine runs
	drains  sync.WaitGroup
}

type leaseWait struct {
	req  store.LeaseRequest
	done chan store.LeaseOutcome // buffered: the writer never waits on it
}

// acquire decides one request with whatever else is pending. It always
// waits for the answer, also when the connection ends meanwhile: a lease
// taken for a connection that is gone is released by the caller, never
// left behind.
func (b *leaseBatcher) acquire(req store.LeaseRequest) (store.Lease, error) {
	w := leaseWait{req: req, done: make(chan store.LeaseOutcome, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	start := !b.busy
	b.busy = true
	if start {
		b.drains.Add(1)
	}
	b.mu.Unlock()
	if start {
		go b.drain()
	}
	o := <-w.done
	return o.Lease, o.Err
}

func (b *leaseBatcher) drain() {
	defer b.drains.Done()
	for {
		b.mu.Lock()
		n := min(len(b.pending), leaseBatchMax)
		if n == 0 {
			b.busy = false
			b.pending = nil
			b.mu.Unlock()
			return
		}
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		b.mu.Unlock()
		b.write(batch)
	}
}

func (b *leaseBatcher) write(batch []leaseWait) {
	reqs := make([]store.LeaseRequest, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	out, err := b.store.AcquireLeases(ctx, reqs)
	for i, w := range batch {
		if err != nil {
			w.done <- store.LeaseOutcome{Lease: store.Lease{DeviceID: w.req.DeviceID, Holder: w.req.Holder, Epoch: w.req.Epoch}, Err: err}
			continue
		}
		w.done <- out[i]
	}
}

// wait waits for a drain under way to end.
func (b *leaseBatcher) wait() { b.drains.Wait() }
