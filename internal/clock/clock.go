// Package clock is the injectable clock of the protocol state machines, at
// both ends: the lane's timers (handshake deadline, liveness, gap, cancel
// grace, execution ceiling, reconnect grace), the executor's (heartbeat,
// backoff, handshake deadline, answer backstops, graces) and the approval
// device's TTLs run on it, so tests drive time instead of sleeping.
package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock tells time and fires timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on its C once d has
	// passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once d has passed; the returned timer's C is nil.
	// Real calls f in its own goroutine; Fake calls it inside Advance. So
	// f must not block, nor take a lock that whoever advances time may
	// hold.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer.
type Timer interface {
	// C is where a NewTimer timer fires; nil for an AfterFunc timer.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did so
	// (false if it already fired or was stopped).
	Stop() bool
}

// C is t's channel, nil (a receive that never fires, in a select) when
// t is nil: a loop that arms a timer only sometimes selects on C(t).
func C(t Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

// Real is the system clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Fake is a manual clock: time moves only when Advance is called, which
// fires the timers that fall due, in order of their due time.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer // armed, not fired, not stopped
	seq     int
	armed   chan struct{} // closed on the next arm; nil until WaitTimer needs it
}

// NewFake returns a Fake clock at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeTimer struct {
	c   *Fake
	d   time.Duration
	due time.Time
	seq int
	f   func()         // an AfterFunc timer
	ch  chan time.Time // a NewTimer timer; buffered, it fires once
}

func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Fake) NewTimer(d time.Duration) Timer {
	return c.arm(&fakeTimer{d: d, ch: make(chan time.Time, 1)})
}

func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	return c.arm(&fakeTimer{d: d, f: f})
}

func (c *Fake) arm(t *fakeTimer) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t.c, t.due, t.seq = c, c.now.Add(t.d), c.seq
	c.pending = append(c.pending, t)
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.removeLocked(t)
}

func (c *Fake) removeLocked(t *fakeTimer) bool {
	i := slices.Index(c.pending, t)
	if i < 0 {
		return false
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	return true
}

// Advance moves time forward by d, firing each timer that falls due, in due
// order (then arming order). A NewTimer timer is fired under the clock's
// lock; an AfterFunc function is called synchronously, without the lock,
// and may arm more timers: those fire too if they fall due within d.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for _, t := range c.pending {
			if !t.due.After(end) && (next == nil || t.due.Before(next.due) || t.due.Equal(next.due) && t.seq < next.seq) {
				next = t
			}
		}
		if next == nil {
			break
		}
		c.removeLocked(next)
		if next.due.After(c.now) {
			c.now = next.due
		}
		if next.f == nil {
			next.ch <- c.now
			continue
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
}

// Pending reports how many timers are armed and neither fired nor stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// WaitTimer waits until a timer whose duration satisfies match is pending
// and returns that duration; false if ctx ends first. It lets a test move
// time only once the code under test has armed the timer it means to fire.
func (c *Fake) WaitTimer(ctx context.Context, match func(d time.Duration) bool) (time.Duration, bool) {
	for {
		c.mu.Lock()
		for _, t := range c.pending {
			if match(t.d) {
				c.mu.Unlock()
				return t.d, true
			}
		}
		if c.armed == nil {
			c.armed = make(chan struct{})
		}
		armed := c.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return 0, false
		}
	}
}
