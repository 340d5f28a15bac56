package executor_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/internal/syncbuf"
	"github.com/sema-agent/sema/protocol"
)

// The goodbye of R15 (§1.6) must be on the wire before the socket closes,
// and the log says "goodbye sent" only once its write returned. These
// tests run the runtime against the fake lane over real loopback sockets;
// wireFault injects the two ways a write goes wrong: it blocks (a lane
// that stopped reading: back-pressure) or it fails (a dead socket).

const goodbyeSent = "goodbye sent"

// An idle executor's goodbye reaches the lane before the normal close,
// run after run (a race between the goodbye and the close would show in
// some of them).
func TestGoodbyeIsOnTheWireBeforeTheClose(t *testing.T) {
	for range 20 {
		log := &logBuffer{}
		h := newHarness(t, log.use)
		c := h.connect(1, nil, nil)
		h.cancel()
		if err := c.WaitEnd(h.ctx()); err != nil {
			t.Fatal(err)
		}
		if err := h.runErr(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		requireGoodbyeThenClose(t, c)
		if !strings.Contains(log.String(), goodbyeSent) {
			t.Fatalf("the log does not say the goodbye was sent:\n%s", log)
		}
	}
}

// A goodbye queued behind a write the lane is not reading (a heartbeat
// here) waits for it, goes out once the lane reads again, and only then is
// the socket closed.
func TestGoodbyeWaitsForABlockedWrite(t *testing.T) {
	log, fault := &logBuffer{}, newWireFault()
	h := newHarness(t, log.use, fault.use)
	c := h.connect(1, nil, nil)
	fault.hold()
	h.clock.WaitTimer(h.ctx(), func(d time.Duration) bool { return d == hbMs*time.Millisecond })
	h.clock.Advance(hbMs * time.Millisecond)
	fault.waitHeld(t)
	h.cancel()
	h.clock.WaitTimer(h.ctx(), func(d time.Duration) bool { return d == 90*time.Second }) // the shutdown grace: shutdown is under way
	if strings.Contains(log.String(), goodbyeSent) {
		t.Fatalf("the log says the goodbye was sent while its write could not have happened:\n%s", log)
	}
	fault.release()
	if err := c.WaitEnd(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if err := h.runErr(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	requireGoodbyeThenClose(t, c)
	if _, ok := c.Frames()[1].(*protocol.Heartbeat); !ok { // after generationAck
		t.Errorf("the blocked heartbeat is not the frame after generationAck: %#v", c.Frames()[1])
	}
	if !strings.Contains(log.String(), goodbyeSent) {
		t.Errorf("the log does not say the goodbye was sent:\n%s", log)
	}
}

// A goodbye whose write never returns (the lane stopped reading for good)
// ends the shutdown at the grace: nothing stays blocked, Run returns, and
// the log says the goodbye was not sent.
func TestGoodbyeStuckEndsAtTheGrace(t *testing.T) {
	log, fault := &logBuffer{}, newWireFault()
	h := newHarness(t, log.use, fault.use)
	c := h.connect(1, nil, nil)
	fault.hold()
	h.cancel()
	fault.waitHeld(t)
	if _, ok := h.clock.WaitTimer(h.ctx(), func(d time.Duration) bool { return d == 90*time.Second }); !ok {
		t.Fatal("no shutdown grace was armed")
	}
	h.clock.Advance(90 * time.Second)
	if err := h.runErr(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := c.WaitEnd(h.ctx()); err != nil {
		t.Fatal(err)
	}
	requireNoGoodbyeSent(t, log, "its write did not return within the grace")
}

// A goodbye whose write fails (the socket is dead) is logged as not sent,
// with the error; Run returns.
func TestGoodbyeWriteFailureIsLoggedAsNotSent(t *testing.T) {
	log, fault := &logBuffer{}, newWireFault()
	h := newHarness(t, log.use, fault.use)
	h.connect(1, nil, nil)
	fault.breakWrites()
	h.cancel()
	if err := h.runErr(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	requireNoGoodbyeSent(t, log, "its write failed")
	if !strings.Contains(log.String(), syscall.EPIPE.Error()) {
		t.Errorf("the log does not name the write's error:\n%s", log)
	}
}

func requireGoodbyeThenClose(t *testing.T, c *fakelane.Conn) {
	t.Helper()
	frames := c.Frames()
	if len(frames) < 2 {
		t.Fatalf("the lane received nothing after generationAck: %#v", frames)
	}
	g, ok := frames[len(frames)-1].(*protocol.Goodbye)
	if !ok {
		t.Fatalf("the last frame before the close is %#v, not goodbye (%d frames)", frames[len(frames)-1], len(frames))
	}
	if g.Reason != protocol.GoodbyeShutdown {
		t.Errorf("goodbye %+v", g)
	}
	if code := c.EndCode(); code != websocket.StatusNormalClosure {
		t.Errorf("the socket ended with %v, want a normal close after the goodbye", code)
	}
}

func requireNoGoodbyeSent(t *testing.T, log *logBuffer, why string) {
	t.Helper()
	if strings.Contains(log.String(), goodbyeSent) {
		t.Errorf("the log says the goodbye was sent, but its write never returned:\n%s", log)
	}
	if !strings.Contains(log.String(), "goodbye not sent: "+why) {
		t.Errorf("the log does not say why the goodbye was not sent (%s):\n%s", why, log)
	}
}

// logBuffer collects the runtime's log.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) use(c *executor.Config) {
	c.Logger = slog.New(slog.NewTextHandler(l, nil))
}

// wireFault is the runtime's real sockets with a switch on their writes:
// pass, hold (a write waits until release or the socket's close) or break
// (a write fails with EPIPE).
type wireFault struct {
	mu       sync.Mutex
	holding  bool
	broken   bool
	released chan struct{}
	held     chan struct{} // closed when a write is first held
	heldOnce sync.Once
}

func newWireFault() *wireFault {
	return &wireFault{released: make(chan struct{}), held: make(chan struct{})}
}

// use dials through the fault. The transport is wrapped in a type of its
// own so the runtime takes the client as it is.
func (f *wireFault) use(c *executor.Config) {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &faultConn{Conn: conn, f: f, closed: make(chan struct{})}, nil
	}}
	c.HTTPClient = &http.Client{Transport: roundTripper{tr}}
}

type roundTripper struct{ t *http.Transport }

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return r.t.RoundTrip(req) }

func (f *wireFault) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = true
}

func (f *wireFault) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = false
	close(f.released)
}

func (f *wireFault) breakWrites() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = true
}

func (f *wireFault) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-f.held:
	case <-time.After(20 * time.Second):
		t.Fatal("no write reached the held socket")
	}
}

type faultConn struct {
	net.Conn
	f         *wireFault
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *faultConn) Write(p []byte) (int, error) {
	c.f.mu.Lock()
	holding, broken := c.f.holding, c.f.broken
	c.f.mu.Unlock()
	switch {
	case broken:
		return 0, syscall.EPIPE
	case holding:
		c.f.heldOnce.Do(func() { close(c.f.held) })
		select {
		case <-c.f.released:
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
