// Package clocktest is a fake executor.Clock for tests: time stands still
// until the test advances it, and the test can wait until the code under
// test has armed a timer (so it never sleeps to "let things happen").
package clocktest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sema-agent/sema/executor"
)

// Clock is a manual clock. The zero value is not usable; use New.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed and replaced whenever a timer is armed
}

// New returns a clock at a fixed instant.
func New() *Clock {
	return &Clock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

type timer struct {
	c    *Clock
	when time.Time
	d    time.Duration
	ch   chan time.Time
	f    func()
	done bool
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.c.timers = slices.DeleteFunc(t.c.timers, func(x *timer) bool { return x == t })
	return true
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) NewTimer(d time.Duration) executor.Timer {
	return c.add(d, nil)
}

func (c *Clock) AfterFunc(d time.Duration, f func()) executor.Timer {
	return c.add(d, f)
}

func (c *Clock) add(d time.Duration, f func()) *timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, when: c.now.Add(d), d: d, f: f}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

// Advance moves time forward by d, firing every timer that falls due, in
// order.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *timer
		for _, t := range c.timers {
			if !t.when.After(end) && (next == nil || t.when.Before(next.when)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		next.done = true
		c.timers = slices.DeleteFunc(c.timers, func(x *timer) bool { return x == next })
		if next.when.After(c.now) {
			c.now = next.when
		}
		if next.f != nil {
			go next.f()
		} else {
			next.ch <- c.now
		}
	}
	c.now = end
	c.mu.Unlock()
}

// Pending returns the durations of the armed timers, in arming order.
func (c *Clock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, len(c.timers))
	for i, t := range c.timers {
		out[i] = t.d
	}
	return out
}

// WaitFor blocks until pred holds for the armed timers' durations, or ctx
// ends (false).
func (c *Clock) WaitFor(ctx context.Context, pred func(pending []time.Duration) bool) bool {
	for {
		c.mu.Lock()
		ch := c.changed
		ds := make([]time.Duration, len(c.timers))
		for i, t := range c.timers {
			ds[i] = t.d
		}
		c.mu.Unlock()
		if pred(ds) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond): // a Stop does not signal
		}
	}
}

// WaitTimer waits until a timer whose duration satisfies match is armed and
// returns its duration.
func (c *Clock) WaitTimer(ctx context.Context, match func(time.Duration) bool) (time.Duration, bool) {
	var got time.Duration
	ok := c.WaitFor(ctx, func(ds []time.Duration) bool {
		for _, d := range ds {
			if match(d) {
				got = d
				return true
			}
		}
		return false
	})
	return got, ok
}
