package httpapi

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// contentBudget bounds the instruction bodies and write content the HTTP
// API holds in memory at once, server-wide (Config.MaxBufferedContent) and
// per identity (Config.MaxBufferedContentPerIdentity), so that one caller
// cannot hold it all. A request reserves what it will hold before its body
// is read; the reservation shrinks as the lane lets go of memory and is
// released once the lane has finished with the content. The lock is a leaf.
type contentBudget struct {
	mu       sync.Mutex
	limit    int64
	perOwner int64
	held     int64
	byOwner  map[string]int64
	// quiet is called, outside the lock, when a release of at least
	// quietAfter bytes leaves less than that held: the moment to hand the
	// freed memory back to the OS (see reclaimMemory).
	quiet func()
}

// quietAfter is the size of a release after which the budget calls quiet.
const quietAfter = 32 << 20

func newContentBudget(limit, perOwner int64, quiet func()) *contentBudget {
	return &contentBudget{limit: limit, perOwner: perOwner, byOwner: map[string]int64{}, quiet: quiet}
}

// reserve takes n bytes of the budget for owner, or reports false if they
// do not fit beside what is held now, in all or by owner.
func (b *contentBudget) reserve(owner string, n int64) (*reservation, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.limit-b.held || n > b.perOwner-b.byOwner[owner] {
		return nil, false
	}
	b.held += n
	b.byOwner[owner] += n
	return &reservation{budget: b, owner: owner, n: n}, true
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
	owner  string
	n      int64 // under budget.mu
}

// shrinkTo gives back all but n bytes; it never grows the reservation.
func (r *reservation) shrinkTo(n int64) {
	if r == nil {
		return
	}
	b := r.budget
	b.mu.Lock()
	freed := max(0, r.n-n)
	b.held -= freed
	r.n -= freed
	if b.byOwner[r.owner] -= freed; b.byOwner[r.owner] == 0 {
		delete(b.byOwner, r.owner)
	}
	quiet := freed >= quietAfter && b.held < quietAfter
	b.mu.Unlock()
	if quiet && b.quiet != nil {
		b.quiet()
	}
}

// release gives back everything; a second call is a no-op.
func (r *reservation) release() { r.shrinkTo(0) }

// reclaimMemory hands the memory freed by large bodies back to the OS. The
// Go runtime would keep it mapped until a later collection and its slow
// scavenger: measured, a lane that had taken one 100 MiB write stayed at
// 253 MiB RSS for over two minutes; with this it is back to 20 MiB within
// a second. One collection runs at a time, in a goroutine the core's
// Shutdown waits for (lane.Server.Go); a call while one runs is dropped
// (that one covers it, or the next large release will), and so is one
// once Shutdown has begun.
type reclaimMemory struct {
	running atomic.Bool
	goFunc  func(func()) bool // lane.Server.Go
}

func (m *reclaimMemory) run() {
	if !m.running.CompareAndSwap(false, true) {
		return
	}
	started := m.goFunc(func() {
		defer m.running.Store(false)
		debug.FreeOSMemory()
	})
	if !started {
		m.running.Store(false)
	}
}
