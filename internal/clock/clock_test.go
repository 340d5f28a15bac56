package clock

import (
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
