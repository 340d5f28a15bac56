package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeRunsDueFunctionsInOrder(t *testing.T) {
	c := NewFake(time.Unix(1000, 0))
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "c") })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a")
		c.AfterFunc(time.Second, func() { got = append(got, "b") }) // due at 2 s
	})
	stopped := c.AfterFunc(2*time.Second, func() { got = append(got, "never") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
	c.Advance(2500 * time.Millisecond)
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("after 2.5 s ran %q, want a b", got)
	}
	if !c.Now().Equal(time.Unix(1002, 500_000_000)) {
		t.Fatalf("now = %v", c.Now())
	}
	c.Advance(time.Second)
	if len(got) != 3 || got[2] != "c" || c.Pending() != 0 {
		t.Fatalf("ran %q, %d pending", got, c.Pending())
	}
}

func TestFakeChannelTimers(t *testing.T) {
	c := NewFake(time.Unix(1000, 0))
	var order []string
	fired := c.NewTimer(2 * time.Second)
	stopped := c.NewTimer(time.Second)
	c.AfterFunc(time.Second, func() { order = append(order, "f") })
	if fn := c.AfterFunc(time.Hour, func() {}); fn.C() != nil {
		t.Fatal("an AfterFunc timer has a channel")
	}
	if !stopped.Stop() {
		t.Fatal("Stop of an armed timer failed")
	}
	c.Advance(3 * time.Second)
	select {
	case at := <-fired.C():
		if !at.Equal(time.Unix(1002, 0)) {
			t.Fatalf("fired at %v, want its due time", at)
		}
	default:
		t.Fatal("a due channel timer did not fire")
	}
	select {
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if fired.Stop() || len(order) != 1 || c.Pending() != 1 {
		t.Fatalf("Stop after firing succeeded, or ran %q with %d pending", order, c.Pending())
	}
}

func TestFakeWaitTimer(t *testing.T) {
	c := NewFake(time.Unix(1000, 0))
	c.NewTimer(time.Second)
	go c.NewTimer(time.Minute) // armed by "the code under test", some time later
	d, ok := c.WaitTimer(t.Context(), func(d time.Duration) bool { return d > time.Second })
	if !ok || d != time.Minute {
		t.Fatalf("WaitTimer = %v, %v", d, ok)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, ok := c.WaitTimer(ctx, func(d time.Duration) bool { return d == time.Hour }); ok {
		t.Fatal("WaitTimer found a timer nobody armed")
	}
}

// C of no timer never fires; C of a timer is its channel.
func TestCOfNoTimerIsNil(t *testing.T) {
	if C(nil) != nil {
		t.Fatal("C(nil) is not nil")
	}
	fc := NewFake(time.Unix(0, 0))
	tm := fc.NewTimer(time.Second)
	if C(tm) != tm.C() {
		t.Fatal("C(t) is not t.C()")
	}
}
