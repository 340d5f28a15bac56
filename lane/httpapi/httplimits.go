package httpapi

import (
	"container/list"
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
	// if there is one; if none is idle it is closed at once and counted in
	// sema_lane_http_connections_refused_total. Default 4096.
	MaxConns int
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
	switch {
	case l.ReadHeaderTimeout < 0, l.IdleTimeout < 0:
		return l, fmt.Errorf("lane: HTTPLimits timeouts must be positive (%v, %v)", l.ReadHeaderTimeout, l.IdleTimeout)
	case l.MaxConns < 1:
		return l, fmt.Errorf("lane: HTTPLimits.MaxConns %d must be at least 1", l.MaxConns)
	}
	return l, nil
}

// LimitHTTP applies limits to hs, which is to serve ln: it sets the
// timeouts, chains hs.ConnState, and returns ln wrapped so that it holds
// the connection cap. Serve hs on the returned listener (Serve or
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
	cl := &connLimiter{Listener: ln, max: limits.MaxConns, metrics: &s.metrics}
	next := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		cl.connState(c, st)
		if next != nil {
			next(c, st)
		}
	}
	return cl, nil
}

// connLimiter is a listener that holds the HTTP connection cap. Every
// count lives under mu: Accept, Close and the http.Server's ConnState hook
// run on different goroutines.
type connLimiter struct {
	net.Listener
	max     int
	metrics *httpMetrics

	mu   sync.Mutex
	open int
	idle list.List // *limitedConn in StateIdle, longest idle first
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

// admit takes a slot for c, evicting the longest-idle keep-alive
// connection if the cap is reached; nil if there is no slot.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	var evict *limitedConn
	l.mu.Lock()
	if l.open >= l.max {
		if front := l.idle.Front(); front != nil {
			evict = front.Value.(*limitedConn)
			l.releaseLocked(evict)
		}
	}
	var lc *limitedConn
	if l.open < l.max {
		l.open++
		l.metrics.httpConnsOpen(1)
		lc = &limitedConn{Conn: c, limiter: l, counted: true}
	}
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close() // its slot is already free; the server sees a closed idle conn
		l.metrics.httpConnEvicted()
	}
	return lc
}

// connState follows the http.Server's view of a connection: idle ones are
// candidates for eviction, hijacked (WebSocket) and closed ones free their
// slot.
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
			lc.idleAt = l.idle.PushBack(lc)
		}
	case http.StateActive:
		l.unidleLocked(lc)
	case http.StateHijacked, http.StateClosed:
		l.releaseLocked(lc)
	}
}

// releaseLocked frees lc's slot, once (l.mu held).
func (l *connLimiter) releaseLocked(lc *limitedConn) {
	l.unidleLocked(lc)
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
	limiter *connLimiter
	counted bool          // holds a slot
	idleAt  *list.Element // in limiter.idle
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
