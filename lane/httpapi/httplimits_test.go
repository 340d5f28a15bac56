package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store/sqlite"

	"github.com/coder/websocket"
)

// The HTTP limits of LimitHTTP on a real listener: the connection cap, its
// eviction of idle keep-alives, WebSockets not counting once upgraded, and
// the idle timeout.

// limitedLane is a lane served by an http.Server under limits.
func limitedLane(t *testing.T, limits HTTPLimits, tls bool) (*limited, *connLimiter, *httptest.Server) {
	t.Helper()
	return limitedLaneAt(t, limits, tls, clock.Real{})
}

// limitedLaneAt is limitedLane on the lane clock clk.
func limitedLaneAt(t *testing.T, limits HTTPLimits, tls bool, clk clock.Clock) (*limited, *connLimiter, *httptest.Server) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := lane.New(lane.Config{Store: st, Logger: slog.New(slog.DiscardHandler), HandshakeDeadline: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	l := &limited{API: New(srv), release: make(chan struct{})}
	hs := httptest.NewUnstartedServer(l)
	ln, err := l.LimitHTTP(hs.Config, hs.Listener, limits)
	if err != nil {
		t.Fatal(err)
	}
	hs.Listener = ln
	if tls {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(hs.Close)
	t.Cleanup(l.releaseHeld) // before hs.Close, which waits for the handlers
	l.url = hs.URL
	return l, ln.(*connLimiter), hs
}

type limited struct {
	*API
	url      string
	release  chan struct{}
	released sync.Once
}

// heldPath is a request the test's handler holds, in the handler, until
// releaseHeld or its client goes: a connection busy with a request, not waiting for one.
const heldPath = "/test/held"

func (l *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == heldPath {
		select {
		case <-l.release:
		case <-r.Context().Done(): // the client went
		}
		return
	}
	l.API.ServeHTTP(w, r)
}

func (l *limited) releaseHeld() { l.released.Do(func() { close(l.release) }) }

// dialWS opens a WebSocket to the lane through the limited server; the
// handshake is never begun, so the socket stays as it was upgraded.
func (l *limited) dialWS(t *testing.T, hs *httptest.Server) (*websocket.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + l.cfg.WSPath
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hs.Client()})
	if err == nil {
		t.Cleanup(func() { ws.CloseNow() })
	}
	return ws, err
}

// waitBound is the failure bound of every wait: reaching it fails the test;
// nothing waits for it to pass.
const waitBound = 10 * time.Second

// eventually polls cond until it holds; reaching waitBound fails the test.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitBound, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// rawConn is a TCP connection speaking HTTP/1.1 by hand.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	return dialRawFrom(t, url, nil)
}

// dialRawFrom dials from the local address from (nil: any).
func dialRawFrom(t *testing.T, url string, from net.IP) *rawConn {
	t.Helper()
	d := net.Dialer{}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// get sends GET /v1/capabilities on the kept-alive connection and reads the
// whole answer.
func (r *rawConn) get() {
	r.t.Helper()
	r.c.SetDeadline(time.Now().Add(waitBound))
	defer r.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(r.c, "GET /v1/capabilities HTTP/1.1\r\nHost: lane\r\n\r\n"); err != nil {
		r.t.Fatalf("writing a request: %v", err)
	}
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading the answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		r.t.Fatalf("GET /v1/capabilities: %d, close %v", resp.StatusCode, resp.Close)
	}
}

// hold sends a request the handler holds until releaseHeld.
func (r *rawConn) hold() {
	r.t.Helper()
	if _, err := io.WriteString(r.c, "GET "+heldPath+" HTTP/1.1\r\nHost: lane\r\n\r\n"); err != nil {
		r.t.Fatalf("writing a request: %v", err)
	}
}

// begin sends the first line of a request and no more: a connection still
// waiting for its request's header, as a slow client or a slowloris holds it.
func (r *rawConn) begin() {
	r.t.Helper()
	if _, err := io.WriteString(r.c, "GET /v1/capabilities HTTP/1.1\r\n"); err != nil {
		r.t.Fatalf("writing a request line: %v", err)
	}
}

// finish sends the rest of begin's request and reads the answer.
func (r *rawConn) finish() {
	r.t.Helper()
	r.c.SetDeadline(time.Now().Add(waitBound))
	defer r.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(r.c, "Host: lane\r\n\r\n"); err != nil {
		r.t.Fatalf("writing the rest of a request: %v", err)
	}
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading the answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		r.t.Fatalf("GET /v1/capabilities: %d", resp.StatusCode)
	}
}

// waitClosed waits for the server to close the connection; reaching the
// wait bound fails.
func (r *rawConn) waitClosed(what string) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(waitBound))
	_, err := r.br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Fatalf("%s: the connection is still open", what)
	}
	if err == nil {
		r.t.Fatalf("%s: the server sent a byte instead of closing", what)
	}
}

func (l *connLimiter) idleConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}

// count is how many requests of identity are counted in.
func (q *identityRequests) count(identity string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.open[identity]
}

// busyConns counts the connections with a request in a handler.
func (l *connLimiter) busyConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open - l.idle.Len() - l.waiting.Len()
}

func wantConns(t *testing.T, l *limited, open int64, refused uint64) {
	t.Helper()
	eventually(t, "the connection counts", func() bool {
		m := l.Metrics()
		return m.HTTPConns == open && m.HTTPConnsRefused == refused
	})
}

// Over the cap, with every connection busy with a request (none idle, none
// still waiting for its request), a new connection is closed at once and
// counted; a freed slot takes a new one.
func TestConnCapClosesTheExtraConnectionAtOnce(t *testing.T) {
	l, cl, _ := limitedLane(t, HTTPLimits{MaxConns: 3}, false)
	var held []*rawConn
	for range 3 {
		c := dialRaw(t, l.url)
		c.hold()
		held = append(held, c)
	}
	eventually(t, "three requests in their handlers", func() bool { return cl.busyConns() == 3 })
	wantConns(t, l, 3, 0)
	extra := dialRaw(t, l.url)
	extra.waitClosed("the connection over the cap")
	wantConns(t, l, 3, 1)
	held[0].c.Close()
	wantConns(t, l, 2, 1)
	dialRaw(t, l.url).get()
	wantConns(t, l, 3, 1)
}

// A connection that has not sent its request's header for half the header
// timeout is the cheapest to lose, and the one a slowloris holds: at the
// cap, with no idle keep-alive, a newcomer closes the oldest such
// connection of its own address, so that one address filling the cap with
// them only ever pushes out its own and one client cannot keep every other
// one out of the lane. A connection that has waited less is never closed
// for a newcomer: a fleet dialling back in at once would close its own.
func TestConnCapClosesAConnectionStillWaitingForItsRequest(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	l, _, _ := limitedLaneAt(t, HTTPLimits{MaxConns: 3}, false, clk)
	var slow []*rawConn
	for range 3 {
		c := dialRaw(t, l.url)
		c.begin()
		slow = append(slow, c)
	}
	wantConns(t, l, 3, 0)
	// Waiting less than half the header timeout: a burst's clients, never
	// closed for one another. The newcomer is refused instead.
	dialRaw(t, l.url).waitClosed("a newcomer while every connection waits less than 5 s")
	clk.Advance(DefaultReadHeaderTimeout / 2)
	dialRaw(t, l.url).get() // served
	slow[0].waitClosed("the oldest connection waiting 5 s for its request")
	slow[1].finish() // the others are left alone
	wantConns(t, l, 3, 1)
	if m := l.Metrics(); m.HTTPConnsEvicted != 1 {
		t.Errorf("evictions counted %d, want 1", m.HTTPConnsEvicted)
	}
}

// A newcomer from an address that holds no waiting connection closes the
// oldest of any address that has waited 5 s; the flooding address's later
// connections then close its own, never the newcomer's, though it is still
// sending its header.
func TestConnCapSlowHeadersOfOneAddressDoNotPushOutAnother(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	l, _, _ := limitedLaneAt(t, HTTPLimits{MaxConns: 3}, false, clk)
	flood := net.IPv4(127, 0, 0, 2)
	if c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: flood}}).Dial("tcp", strings.TrimPrefix(l.url, "http://")); err != nil {
		t.Skipf("no second loopback address here: %v", err)
	} else {
		// Served and closed before the flood, so that it takes no slot.
		probe := &rawConn{t: t, c: c, br: bufio.NewReader(c)}
		probe.get()
		c.Close()
		wantConns(t, l, 0, 0)
	}
	var slow []*rawConn
	for range 3 {
		c := dialRawFrom(t, l.url, flood)
		c.begin()
		slow = append(slow, c)
	}
	wantConns(t, l, 3, 0)
	clk.Advance(DefaultReadHeaderTimeout / 2)
	other := dialRaw(t, l.url) // from 127.0.0.1
	other.begin()
	slow[0].waitClosed("the flood's oldest, for another address")
	for i := range 3 {
		clk.Advance(DefaultReadHeaderTimeout / 2)
		c := dialRawFrom(t, l.url, flood)
		c.begin()
		slow[1+i%2].waitClosed("the flood's oldest, for the flood")
		slow[1+i%2] = c
	}
	other.finish()
}

// At the cap a new connection closes the longest-idle keep-alive rather
// than being refused: a device can still dial in when idle HTTP clients
// hold every slot. A WebSocket stops counting once upgraded. Connections
// busy with a request (in its handler) are never closed for a newcomer, so
// when they fill the cap a WebSocket dial is refused like any other.
func TestConnCapGivesWayToWebSockets(t *testing.T) {
	l, cl, hs := limitedLane(t, HTTPLimits{MaxConns: 2}, false)
	oldest, newer := dialRaw(t, l.url), dialRaw(t, l.url)
	oldest.get()
	eventually(t, "the first keep-alive to be idle", func() bool { return cl.idleConns() == 1 })
	newer.get()
	eventually(t, "both keep-alives to be idle", func() bool { return cl.idleConns() == 2 })

	ws, err := l.dialWS(t, hs) // over a connection the cap lets in by closing oldest
	if err != nil {
		t.Fatal(err)
	}
	// The lane's challenge is its one message before a hello: read it,
	// then keep reading (pings need a reader) until the test ends.
	if _, _, err := ws.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	ws.CloseRead(t.Context())
	oldest.waitClosed("the longest-idle keep-alive")
	wantConns(t, l, 1, 0) // newer is idle again; the WebSocket does not count
	if m := l.Metrics(); m.HTTPConnsEvicted != 1 {
		t.Errorf("evictions counted %d, want 1: an operator must see them", m.HTTPConnsEvicted)
	}

	fresh := dialRaw(t, l.url) // takes the free slot: newer stays
	wantConns(t, l, 2, 0)
	newer.get()
	// newer must be the longer idle below: under load the server can mark
	// fresh idle first if both requests are in flight together.
	eventually(t, "newer to be idle", func() bool { return cl.idleConns() == 1 })
	fresh.get()

	// Two requests in their handlers fill the cap (each new connection
	// closes an idle keep-alive); then a WebSocket dial is refused.
	eventually(t, "both to be idle", func() bool { return cl.idleConns() == 2 })
	a := dialRaw(t, l.url)
	a.hold()
	newer.waitClosed("the idle keep-alive before a")
	b := dialRaw(t, l.url)
	b.hold()
	fresh.waitClosed("the idle keep-alive before b")
	eventually(t, "two requests in their handlers", func() bool { return cl.busyConns() == 2 })
	wantConns(t, l, 2, 0)
	if ws, err := l.dialWS(t, hs); err == nil {
		ws.CloseNow()
		t.Fatal("a WebSocket dial got through a cap full of connections busy with requests")
	}
	wantConns(t, l, 2, 1)
	// The first WebSocket was never touched.
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	if err := ws.Ping(ctx); err != nil {
		t.Fatalf("the first WebSocket: %v", err)
	}
}

// Behind TLS the http.Server sees a *tls.Conn: the upgraded socket still
// gives its slot back.
func TestConnCapReleasesAnUpgradedSocketUnderTLS(t *testing.T) {
	l, _, hs := limitedLane(t, HTTPLimits{MaxConns: 1}, true)
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(hs.URL, "https")+l.cfg.WSPath, &websocket.DialOptions{HTTPClient: hs.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	wantConns(t, l, 0, 0)
	resp, err := hs.Client().Get(hs.URL + "/v1/capabilities")
	if err != nil {
		t.Fatalf("a request beside the WebSocket: %v", err)
	}
	// Read to the end: a body closed unread makes the client drop the
	// connection, and the count falls back to 0 at once.
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	wantConns(t, l, 1, 0)
}

// IdleTimeout closes a keep-alive connection that waits for its next
// request.
func TestIdleTimeoutClosesAKeepAliveConnection(t *testing.T) {
	l, _, _ := limitedLane(t, HTTPLimits{IdleTimeout: 50 * time.Millisecond}, false)
	c := dialRaw(t, l.url)
	c.get()
	c.waitClosed("the idle keep-alive")
	wantConns(t, l, 0, 0)
}

func TestHTTPLimitsRefuseNonsense(t *testing.T) {
	l, _, _ := limitedLane(t, HTTPLimits{}, false)
	for _, bad := range []HTTPLimits{{MaxConns: -1}, {MaxRequestsPerIdentity: -1}, {IdleTimeout: -time.Second}, {ReadHeaderTimeout: -1}} {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		if _, err := l.LimitHTTP(&http.Server{}, ln, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	hs := &http.Server{}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	if _, err := l.LimitHTTP(hs, ln, HTTPLimits{}); err != nil || hs.IdleTimeout != DefaultIdleTimeout || hs.ReadHeaderTimeout != DefaultReadHeaderTimeout {
		t.Fatalf("defaults: %v, idle %v, header %v", err, hs.IdleTimeout, hs.ReadHeaderTimeout)
	}
}

// stalledBody sends an authenticated request whose body never finishes: a
// request that stays in its handler (reading the body) until the client
// goes or the body timeout.
func (r *rawConn) stalledBody(apiKey string) {
	r.t.Helper()
	req := "POST /v1/sessions/s/rebind HTTP/1.1\r\nHost: lane\r\nAuthorization: Bearer " + apiKey + "\r\nContent-Length: 100\r\n\r\n{"
	if _, err := io.WriteString(r.c, req); err != nil {
		r.t.Fatalf("writing a request: %v", err)
	}
}

// do sends a GET with apiKey and returns the answer's status and error code.
func (r *rawConn) do(path, apiKey string) (int, string) {
	r.t.Helper()
	r.c.SetDeadline(time.Now().Add(waitBound))
	defer r.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(r.c, "GET "+path+" HTTP/1.1\r\nHost: lane\r\nAuthorization: Bearer "+apiKey+"\r\n\r\n"); err != nil {
		r.t.Fatalf("writing a request: %v", err)
	}
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	var e struct{ ErrorCode string }
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.ErrorCode
}

// One identity may have at most a quarter of the connection cap in
// requests at once (HTTPLimits.MaxRequestsPerIdentity's default): one more
// is 503 service.busy, so that a caller holding long requests (streams of
// instructions queued on its own device) cannot take every connection and
// keep the others, and the devices dialling in, out of the lane.
func TestOneIdentityCannotHoldMoreThanItsShareOfTheConnections(t *testing.T) {
	l, cl, _ := limitedLane(t, HTTPLimits{MaxConns: 8}, false)
	hogID, hog, err := lane.CreateIdentity(t.Context(), l.store, "hog")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := lane.CreateIdentity(t.Context(), l.store, "other")
	if err != nil {
		t.Fatal(err)
	}
	var held []*rawConn
	for range 2 {
		c := dialRaw(t, l.url)
		c.stalledBody(hog)
		held = append(held, c)
	}
	eventually(t, "two requests in their handlers", func() bool { return cl.busyConns() == 2 })
	eventually(t, "the hog's two requests counted", func() bool { return l.requests.count(hogID.ID) == 2 })
	third := dialRaw(t, l.url)
	if st, code := third.do("/v1/whoami", hog); st != http.StatusServiceUnavailable || code != "service.busy" {
		t.Fatalf("the hog's third request: %d %s, want 503 service.busy", st, code)
	}
	if st, _ := dialRaw(t, l.url).do("/v1/whoami", other); st != http.StatusOK {
		t.Fatalf("another identity's request: %d", st)
	}
	held[0].c.Close()
	eventually(t, "the closed request to leave its handler", func() bool { return l.requests.count(hogID.ID) == 1 })
	if st, _ := dialRaw(t, l.url).do("/v1/whoami", hog); st != http.StatusOK {
		t.Fatalf("the hog's request once one ended: %d", st)
	}
}

// An MCP tool's calls run inside the /v1/mcp request that asked for them,
// which is already counted: they are not counted again, so an MCP call
// works at any MaxRequestsPerIdentity, 1 included.
func TestMCPToolCallsAreNotCountedTwice(t *testing.T) {
	l, _, _ := limitedLane(t, HTTPLimits{MaxConns: 8, MaxRequestsPerIdentity: 1}, false)
	_, key, err := lane.CreateIdentity(t.Context(), l.store, "u")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices","arguments":{}}}`
	st, got := postMCP(t, l.url+"/v1/mcp", key, body)
	if st != http.StatusOK || !strings.Contains(got, `"result"`) || strings.Contains(got, `"isError":true`) {
		t.Fatalf("list_devices over MCP: %d %s", st, got)
	}
}
