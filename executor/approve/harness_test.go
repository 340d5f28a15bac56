package approve_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/nexting"
)

// simDevice is a simulated approval device listening on a real unix
// socket, as `sema nexting sim` does: each connection is served by a fresh
// nexting.Sim on the test's fake clock.
type simDevice struct {
	t      *testing.T
	path   string
	clk    *clock.Fake
	gclk   *gateClock // the same clock, as the gate sees it
	info   []byte
	ln     *net.UnixListener
	conns  chan *nexting.SimConn
	mu     sync.Mutex
	served []*nexting.SimConn
	done   chan struct{}
}

func newSimDevice(t *testing.T, clk *clock.Fake, info []byte) *simDevice {
	t.Helper()
	dir, err := os.MkdirTemp("", "approve") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &simDevice{t: t, path: filepath.Join(dir, "sim.sock"), clk: clk, gclk: watch(clk), info: info,
		conns: make(chan *nexting.SimConn, 16), done: make(chan struct{})}
	d.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: d.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	go d.accept()
	t.Cleanup(d.close)
	return d
}

func (d *simDevice) accept() {
	defer close(d.done)
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		sim, err := nexting.NewSim(d.info)
		if err != nil {
			d.t.Error(err)
			c.Close()
			return
		}
		sc := nexting.ServeSim(c, sim, d.clk)
		d.mu.Lock()
		d.served = append(d.served, sc)
		d.mu.Unlock()
		d.conns <- sc
	}
}

func (d *simDevice) close() {
	d.ln.Close()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, sc := range d.served {
		sc.Close()
	}
}

func (d *simDevice) target() approve.Target {
	t, err := approve.ParseTarget("unix:"+d.path, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	return t
}

// next returns the connection the gate made.
func (d *simDevice) next(ctx context.Context) *nexting.SimConn {
	d.t.Helper()
	select {
	case sc := <-d.conns:
		return sc
	case <-ctx.Done():
		d.t.Fatal("the gate never connected to the device")
	}
	return nil
}

// waitView waits until the device shows what ok accepts, and returns it.
func waitView(ctx context.Context, t *testing.T, sc *nexting.SimConn, what string, ok func(nexting.SimView) bool) nexting.SimView {
	t.Helper()
	for {
		if v := sc.View(); ok(v) {
			return v
		}
		select {
		case <-sc.Changed():
		case <-ctx.Done():
			t.Fatalf("the device never showed %s; it shows %+v", what, sc.View())
		}
	}
}

func pending(v nexting.SimView) bool { return v.State == nexting.DevicePending }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newGate starts a gate on d, connected, and stops it at cleanup.
func newGate(t *testing.T, d *simDevice, ws string, p *approve.Policy) *approve.Gate {
	t.Helper()
	tg := d.target()
	g, err := approve.New(approve.Config{Policy: p, WorkspaceRoot: ws, Device: tg.String(), Open: tg.Open, Clock: d.gclk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.WaitConnected(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return g
}

var _ io.Closer = (*approve.Gate)(nil)

// gateClock is the fake clock as the gate and its session see it: it
// notes every timer they arm, so that a test moves time past a deadline
// only once the timer for it exists (the gate's waits and retries are armed
// by its own goroutines, at moments a test cannot otherwise see).
type gateClock struct {
	*clock.Fake
	mu    sync.Mutex
	armed map[time.Duration]int
	ch    chan struct{}
}

func watch(c *clock.Fake) *gateClock {
	return &gateClock{Fake: c, armed: map[time.Duration]int{}, ch: make(chan struct{}, 1)}
}

func (c *gateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Fake.AfterFunc(d, f)
	c.mu.Lock()
	c.armed[d]++
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
	return t
}

// advancePast waits until a timer of d is armed (each call consumes one),
// then moves time by d.
func (c *gateClock) advancePast(ctx context.Context, t *testing.T, d time.Duration) {
	t.Helper()
	for {
		c.mu.Lock()
		n := c.armed[d]
		if n > 0 {
			c.armed[d]--
		}
		c.mu.Unlock()
		if n > 0 {
			c.Advance(d)
			return
		}
		select {
		case <-c.ch:
		case <-ctx.Done():
			t.Fatalf("no timer of %v was armed", d)
		}
	}
}
