package lane

import "sync"

// contentBudget bounds the instruction bodies and write content the HTTP
// API holds in memory at once, server-wide (Config.MaxBufferedContent).
// A request reserves what it will hold before its body is read; the
// reservation shrinks as the lane lets go of memory and is released once
// the lane has finished with the content. The lock is a leaf.
type contentBudget struct {
	mu    sync.Mutex
	limit int64
	held  int64
}

func newContentBudget(limit int64) *contentBudget { return &contentBudget{limit: limit} }

// reserve takes n bytes of the budget, or reports false if they do not fit
// beside what is held now.
func (b *contentBudget) reserve(n int64) (*reservation, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.limit-b.held {
		return nil, false
	}
	b.held += n
	return &reservation{budget: b, n: n}, true
}

// inUse is the bytes reserved now.
func (b *contentBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// reservation is one request's share of a contentBudget. Its methods are
// safe on a nil reservation (nothing reserved) and from any goroutine.
type reservation struct {
	budget *contentBudget
	n      int64 // under budget.mu
}

// shrinkTo gives back all but n bytes; it never grows the reservation.
func (r *reservation) shrinkTo(n int64) {
	if r == nil {
		return
	}
	b := r.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < r.n {
		b.held -= r.n - n
		r.n = n
	}
}

// release gives back everything; a second call is a no-op.
func (r *reservation) release() { r.shrinkTo(0) }
