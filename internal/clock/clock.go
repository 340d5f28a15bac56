// Package clock is the injectable clock of the protocol state machines: the
// lane's timers (handshake deadline, liveness, gap, cancel grace, execution
// ceiling, reconnect grace) run on it, so tests drive time instead of
// sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did so.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a manual clock: time moves only when Advance is called, which
// runs the functions that fall due, in order of their due time.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer
	seq     int
}

// NewFake returns a Fake clock at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeTimer struct {
	c    *Fake
	due  time.Time
	seq  int
	f    func()
	done bool
}

func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, due: c.now.Add(d), seq: c.seq, f: f}
	c.pending = append(c.pending, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves time forward by d, calling each function that falls due
// synchronously, in due order (a function may schedule more; those run too
// if they fall due within d).
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.pending, func(i, j int) bool {
			a, b := c.pending[i], c.pending[j]
			return a.due.Before(b.due) || a.due.Equal(b.due) && a.seq < b.seq
		})
		var next *fakeTimer
		for len(c.pending) > 0 {
			t := c.pending[0]
			if t.done {
				c.pending = c.pending[1:]
				continue
			}
			if !t.due.After(end) {
				next = t
				c.pending = c.pending[1:]
			}
			break
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		next.done = true
		if next.due.After(c.now) {
			c.now = next.due
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending reports how many functions are scheduled and not stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.pending {
		if !t.done {
			n++
		}
	}
	return n
}
