package cluster

import (
	"net/url"
	"testing"
	"time"
)

type steppedClock struct{ t time.Time }

func (c *steppedClock) now() time.Time { return c.t }

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A route is kept for its ttl and no longer; Forget drops it at once.
func TestARouteIsKeptForItsTTL(t *testing.T) {
	clock := &steppedClock{time.Unix(1000, 0)}
	r := NewRoutes(45*time.Second, 10, clock.now)
	r.Put("dev_A", "rep_1", mustURL(t, "http://a:1"))
	if rep, base, ok := r.Get("dev_A"); !ok || rep != "rep_1" || base.Host != "a:1" {
		t.Fatalf("Get = %q, %v, %v; want rep_1 at a:1", rep, base, ok)
	}
	clock.t = clock.t.Add(45*time.Second - time.Nanosecond)
	if _, _, ok := r.Get("dev_A"); !ok {
		t.Fatal("the route expired before its ttl")
	}
	clock.t = clock.t.Add(time.Nanosecond)
	if _, _, ok := r.Get("dev_A"); ok || r.Len() != 0 {
		t.Fatalf("the route outlived its ttl (%d kept)", r.Len())
	}
	r.Put("dev_A", "rep_2", mustURL(t, "http://b:2"))
	r.Forget("dev_A")
	if _, _, ok := r.Get("dev_A"); ok {
		t.Fatal("a forgotten route is still there")
	}
}

// At the bound the expired routes go first; when none has expired, all
// go: the count never passes the bound.
func TestRoutesNeverPassTheirBound(t *testing.T) {
	clock := &steppedClock{time.Unix(1000, 0)}
	r := NewRoutes(time.Minute, 3, clock.now)
	base := mustURL(t, "http://a:1")
	r.Put("dev_1", "rep_1", base)
	r.Put("dev_2", "rep_1", base)
	clock.t = clock.t.Add(50 * time.Second)
	r.Put("dev_3", "rep_1", base)
	clock.t = clock.t.Add(20 * time.Second) // dev_1 and dev_2 expired
	r.Put("dev_4", "rep_1", base)
	if r.Len() != 2 {
		t.Fatalf("%d routes after evicting the expired; want 2", r.Len())
	}
	if _, _, ok := r.Get("dev_3"); !ok {
		t.Fatal("a live route was evicted while expired ones were there")
	}
	r.Put("dev_5", "rep_1", base)
	r.Put("dev_6", "rep_1", base) // at the bound, none expired: all go
	if r.Len() != 1 {
		t.Fatalf("%d routes; want 1 after a full clear", r.Len())
	}
	r.Put("dev_6", "rep_2", base) // replacing a known route takes no room
	if rep, _, _ := r.Get("dev_6"); rep != "rep_2" || r.Len() != 1 {
		t.Fatalf("dev_6 on %q with %d routes", rep, r.Len())
	}
}
