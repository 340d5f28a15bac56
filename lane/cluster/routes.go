package cluster

import (
	"net/url"
	"sync"
	"time"
)

// Routes remembers which replica held a device's connection when the
// registry was last read, so that a replica forwarding one device's
// requests one after another reads the registry once, not per request.
// It may be wrong: the device reconnects elsewhere. It is never trusted
// for more than routing. The replica it names refuses a request for a
// device it does not hold, before it reads the request's body (421 with
// HeaderMisdirected), and the forwarding replica then forgets the route
// and asks the registry again; a route whose replica cannot be reached is
// forgotten too. Routes is pure: a clock and a bound.
type Routes struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu     sync.Mutex
	routes map[string]route
}

type route struct {
	replica string
	base    *url.URL
	until   time.Time
}

// NewRoutes keeps at most max routes, each for ttl.
func NewRoutes(ttl time.Duration, max int, now func() time.Time) *Routes {
	return &Routes{ttl: ttl, max: max, now: now, routes: map[string]route{}}
}

// Get returns the replica and URL remembered for the device, if any and
// not older than the ttl.
func (r *Routes) Get(deviceID string) (replica string, base *url.URL, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt, ok := r.routes[deviceID]
	if !ok {
		return "", nil, false
	}
	if !r.now().Before(rt.until) {
		delete(r.routes, deviceID)
		return "", nil, false
	}
	return rt.replica, rt.base, true
}

// Put remembers that replica, at base, holds the device. At the bound,
// the expired routes go first, and all of them if none has expired: a
// route is only ever a hint.
func (r *Routes) Put(deviceID, replica string, base *url.URL) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if _, known := r.routes[deviceID]; !known && len(r.routes) >= r.max {
		for id, rt := range r.routes {
			if !now.Before(rt.until) {
				delete(r.routes, id)
			}
		}
		if len(r.routes) >= r.max {
			clear(r.routes)
		}
	}
	r.routes[deviceID] = route{replica: replica, base: base, until: now.Add(r.ttl)}
}

// Forget drops the device's route.
func (r *Routes) Forget(deviceID string) {
	r.mu.Lock()
	delete(r.routes, deviceID)
	r.mu.Unlock()
}

// Len is how many routes are kept.
func (r *Routes) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.routes)
}
