package httpapi

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTPLimits are the resource limits of the http.Server that carries the
// lane. Zero values take the defaults. LimitHTTP applies them; `sema
// server` does, and an embedder that mounts Handler on its own server
// should too.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers; default 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request; default 120 s.
	IdleTimeout time.Duration
	// MaxConns caps the open HTTP connections that are not WebSockets: an
	// upgraded connection stops counting once it is hijacked. At the cap a
	// new connection first closes the longest-idle keep-alive connection,
	// if there is one; else the oldest connection that has waited at least
	// half of ReadHeaderTimeout for its request (its header not yet read: a
	// slow client, or a slowloris) of the newcomer's own address, or of any
	// address when it holds none; with neither, the new one is closed at
	// once and counted in sema_lane_http_connections_refused_total. A
	// connection that waits less is never closed for a newcomer, so that a
	// burst of clients (a fleet of devices dialling back in) fills the cap
	// and waits its turn rather than closing its own. Default 4096.
	MaxConns int
	// MaxRequestsPerIdentity caps the requests one identity has in their
	// handlers at once; one more is 503 service.busy. Default a quarter of
	// MaxConns (at least 1), so that no caller can take every connection.
	MaxRequestsPerIdentity int
}

// Defaults of HTTPLimits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHTTPConns      = 4096
)

func (l HTTPLimits) withDefaults() (HTTPLimits, error) {
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxConns == 0 {
		l.MaxConns = DefaultMaxHTTPConns
	}
	if l.MaxRequestsPerIdentity == 0 {
		l.MaxRequestsPerIdentity = max(1, l.MaxConns/4)
	}
	switch {
	case l.ReadHeaderTimeout < 0, l.IdleTimeout < 0:
		return l, fmt.Errorf("lane: HTTPLimits timeouts must be positive (%v, %v)", l.ReadHeaderTimeout, l.IdleTimeout)
	case l.MaxConns < 1:
		return l, fmt.Errorf("lane: HTTPLimits.MaxConns %d must be at least 1", l.MaxConns)
	case l.MaxRequestsPerIdentity < 1:
		return l, fmt.Errorf("lane: HTTPLimits.MaxRequestsPerIdentity %d must be at least 1", l.MaxRequestsPerIdentity)
	}
	return l, nil
}

// LimitHTTP applies limits to hs, which is to serve ln: it sets the
// timeouts, chains hs.ConnState and hs.ConnContext, wraps hs.Handler (set
// it first: a connection whose request is in a handler LimitHTTP did not
// wrap counts as waiting for one, which a newcomer at the cap may close),
// and returns ln wrapped so that it holds the connection cap. Serve hs on the returned listener (Serve or
// ServeTLS). The cap counts connections from Accept to Close, less the
// hijacked ones (hs.ConnState sees them hijacked); a listener is tied to
// the http.Server given here.
func (s *API) LimitHTTP(hs *http.Server, ln net.Listener, limits HTTPLimits) (net.Listener, error) {
	limits, err := limits.withDefaults()
	if err != nil {
		return nil, err
	}
	hs.ReadHeaderTimeout = limits.ReadHeaderTimeout
	hs.IdleTimeout = limits.IdleTimeout
	s.requests.setMax(limits.MaxRequestsPerIdentity)
	cl := &connLimiter{Listener: ln, max: limits.MaxConns, metrics: &s.metrics, now: s.cfg.Clock.Now,
		minWait: limits.ReadHeaderTimeout / 2, waitingBy: map[string]*list.List{}}
	next := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		cl.connState(c, st)
		if next != nil {
			next(c, st)
		}
	}
	nextCtx := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if nextCtx != nil {
			ctx = nextCtx(ctx, c)
		}
		if lc := unwrapLimited(c); lc != nil && lc.limiter == cl {
			ctx = context.WithValue(ctx, limitedConnKey{}, lc)
		}
		return ctx
	}
	hs.Handler = cl.busy(hs.Handler)
	return cl, nil
}

// limitedConnKey is the request context's key of its limitedConn.
type limitedConnKey struct{}

// busy marks a connection busy while h serves a request on it: it waits
// for no request then, and is not closed for a newcomer.
func (l *connLimiter) busy(h http.Handler) http.Handler {
	if h == nil {
		h = http.DefaultServeMux // what the http.Server serves for a nil Handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(limitedConnKey{}).(*limitedConn)
		if lc == nil {
			h.ServeHTTP(w, r)
			return
		}
		l.serving(lc, 1)
		defer l.serving(lc, -1)
		h.ServeHTTP(w, r)
	})
}

// serving counts a handler in (1) or out (-1) of lc: a connection with
// none, neither idle nor closed, waits for a request (or reads the rest of
// the last one's body before its next).
func (l *connLimiter) serving(lc *limitedConn, d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lc.handlers += d
	switch {
	case !lc.counted:
	case lc.handlers > 0:
		l.unwaitLocked(lc)
	case lc.idleAt == nil:
		l.waitLocked(lc)
	}
}

// connLimiter is a listener that holds the HTTP connection cap. Every
// count lives under mu: Accept, Close and the http.Server's ConnState hook
// run on different goroutines.
type connLimiter struct {
	net.Listener
	max     int
	metrics *httpMetrics
	now     func() time.Time
	// minWait is how long a connection waits for its request before a
	// newcomer at the cap may close it.
	minWait time.Duration

	mu   sync.Mutex
	open int
	idle list.List // *limitedConn in StateIdle, longest idle first
	// The connections waiting for a request (accepted, or active with no
	// handler running), oldest first: all of them, and by address.
	waiting   list.List
	waitingBy map[string]*list.List
}

// Accept returns the next connection within the cap; connections over it
// are closed here and never reach the http.Server.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
		c.Close()
		l.metrics.httpConnRefused()
	}
}

// admit takes a slot for c, evicting a connection if the cap is reached
// (HTTPLimits.MaxConns says which); nil if there is no slot.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	addr := hostOf(c.RemoteAddr())
	var evict *limitedConn
	l.mu.Lock()
	if l.open >= l.max {
		if evict = l.evictableLocked(addr, l.now()); evict != nil {
			l.releaseLocked(evict)
		}
	}
	var lc *limitedConn
	if l.open < l.max {
		l.open++
		l.metrics.httpConnsOpen(1)
		lc = &limitedConn{Conn: c, limiter: l, counted: true, addr: addr}
		l.waitLocked(lc)
	}
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close() // its slot is already free; the server sees a closed idle conn
		l.metrics.httpConnEvicted()
	}
	return lc
}

// evictableLocked is the connection a newcomer from addr closes at the
// cap: the longest-idle keep-alive, else the oldest that has waited
// minWait for a request, of addr, else of any address; nil if none (l.mu
// held).
func (l *connLimiter) evictableLocked(addr string, now time.Time) *limitedConn {
	if front := l.idle.Front(); front != nil {
		return front.Value.(*limitedConn)
	}
	if own := l.waitingBy[addr]; own != nil {
		if lc := own.Front().Value.(*limitedConn); now.Sub(lc.waitingSince) >= l.minWait {
			return lc
		}
	}
	if front := l.waiting.Front(); front != nil {
		if lc := front.Value.(*limitedConn); now.Sub(lc.waitingSince) >= l.minWait {
			return lc
		}
	}
	return nil
}

// hostOf is the address a connection came from, without its port.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	s := a.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// connState follows the http.Server's view of a connection: idle ones are
// candidates for eviction, and so are active ones waiting for their
// request; hijacked (WebSocket) and closed ones free their slot.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc := unwrapLimited(c)
	if lc == nil || lc.limiter != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		if lc.counted && lc.idleAt == nil {
			l.unwaitLocked(lc)
			lc.idleAt = l.idle.PushBack(lc)
		}
	case http.StateActive:
		l.unidleLocked(lc)
		if lc.counted && lc.handlers == 0 {
			l.waitLocked(lc)
		}
	case http.StateHijacked, http.StateClosed:
		l.releaseLocked(lc)
	}
}

// waitLocked lists lc as waiting for a request, unless it is (l.mu held).
func (l *connLimiter) waitLocked(lc *limitedConn) {
	if lc.waitingAt != nil {
		return
	}
	lc.waitingAt, lc.waitingSince = l.waiting.PushBack(lc), l.now()
	own := l.waitingBy[lc.addr]
	if own == nil {
		own = list.New()
		l.waitingBy[lc.addr] = own
	}
	lc.waitingByAt = own.PushBack(lc)
}

func (l *connLimiter) unwaitLocked(lc *limitedConn) {
	if lc.waitingAt == nil {
		return
	}
	l.waiting.Remove(lc.waitingAt)
	own := l.waitingBy[lc.addr]
	own.Remove(lc.waitingByAt)
	if own.Len() == 0 {
		delete(l.waitingBy, lc.addr)
	}
	lc.waitingAt, lc.waitingByAt = nil, nil
}

// releaseLocked frees lc's slot, once (l.mu held).
func (l *connLimiter) releaseLocked(lc *limitedConn) {
	l.unidleLocked(lc)
	l.unwaitLocked(lc)
	if lc.counted {
		lc.counted = false
		l.open--
		l.metrics.httpConnsOpen(-1)
	}
}

func (l *connLimiter) unidleLocked(lc *limitedConn) {
	if lc.idleAt != nil {
		l.idle.Remove(lc.idleAt)
		lc.idleAt = nil
	}
}

// unwrapLimited finds the limitedConn under c (a *tls.Conn wraps it when
// the server serves TLS).
func unwrapLimited(c net.Conn) *limitedConn {
	for c != nil {
		if lc, ok := c.(*limitedConn); ok {
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// limitedConn is a connection holding a slot of its connLimiter until it
// is closed or hijacked. Its fields are under limiter.mu.
type limitedConn struct {
	net.Conn
	limiter      *connLimiter
	addr         string        // the remote host, for limiter.waitingBy
	counted      bool          // holds a slot
	idleAt       *list.Element // in limiter.idle
	handlers     int           // requests in a handler on it
	waitingAt    *list.Element // in limiter.waiting
	waitingSince time.Time     // when it was listed in limiter.waiting
	waitingByAt  *list.Element // in limiter.waitingBy[addr]
}

func (c *limitedConn) Close() error {
	c.limiter.mu.Lock()
	c.limiter.releaseLocked(c)
	c.limiter.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite keeps the http.Server's half-close before a reset: it lets a
// client read an early answer (a 503 before its body was read) before the
// connection goes.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
