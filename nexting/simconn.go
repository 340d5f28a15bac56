package nexting

import (
	"io"
	"sync"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

// SimConn runs a Sim on the device end of one stream connection: it writes
// the Device Info line, then feeds received frames to the Sim, sends what
// the Sim answers, resends answers and applies the local TTL on the clock.
// A terminal UI presses keys with Press, renders View, and redraws when
// Changed fires. Every method is safe for concurrent use.
//
// It owns one goroutine (reading the connection) besides the Stream's two;
// Close, or the end of the connection, ends them, and the Sim is Reset
// (a disconnect clears the approval UI and the status).
type SimConn struct {
	sim *Sim
	st  *Stream
	clk Clock

	mu       sync.Mutex
	ended    bool
	timer    Timer
	timerAt  time.Time
	timerGen uint64

	changed chan struct{} // cap 1
	done    chan struct{}
}

// ServeSim starts serving sim over rw with clk (nil: the system clock).
// The Sim must not be used elsewhere until the SimConn is done; it may be
// served again afterwards (it starts each connection Reset).
func ServeSim(rw io.ReadWriter, sim *Sim, clk Clock) *SimConn {
	if clk == nil {
		clk = clock.Real{}
	}
	sim.Reset()
	c := &SimConn{
		sim:     sim,
		st:      NewStream(rw, StreamConfig{Framer: sim.NewFramer()}),
		clk:     clk,
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	_ = c.st.Send(sim.InfoLine()) // the first thing on a fresh stream: cannot fail but by ending
	go c.readLoop()
	return c
}

// Press presses allow or deny; it reports whether an answer was sent (only
// when a request was Pending).
func (c *SimConn) Press(ch Choice) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	now := c.clk.Now()
	frames := c.sim.Press(now, ch)
	c.sendAll(frames)
	c.settle(now)
	return len(frames) > 0
}

// View is what the device shows now.
func (c *SimConn) View() SimView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sim.View(c.clk.Now())
}

// Changed receives a value after the device's state may have changed (a
// frame was handled, a key pressed, a timer fired, the connection ended).
// Signals coalesce: read View after each.
func (c *SimConn) Changed() <-chan struct{} { return c.changed }

// Done is closed when the connection has ended and the goroutine returned.
func (c *SimConn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, nil while it runs.
func (c *SimConn) Err() error { return c.st.Err() }

// Close disconnects and waits for the goroutines.
func (c *SimConn) Close() error {
	err := c.st.Close()
	<-c.done
	return err
}

func (c *SimConn) readLoop() {
	defer close(c.done)
	for r := range c.st.Results() {
		c.mu.Lock()
		now := c.clk.Now()
		c.sendAll(c.sim.Receive(now, r))
		c.settle(now)
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.ended = true
	c.stopTimer()
	c.sim.Reset()
	c.signal()
	c.mu.Unlock()
	_ = c.st.Close()
}

func (c *SimConn) sendAll(frames [][]byte) {
	for _, f := range frames {
		if err := c.st.Send(f); err != nil {
			return // the stream has ended or the host stopped reading: the answer is resent on the next tick
		}
	}
}

func (c *SimConn) settle(now time.Time) {
	defer c.signal()
	at, ok := c.sim.Deadline()
	if !ok {
		c.stopTimer()
		return
	}
	if c.timer != nil && at.Equal(c.timerAt) {
		return
	}
	c.stopTimer()
	c.timerGen++
	gen := c.timerGen
	c.timerAt = at
	c.timer = c.clk.AfterFunc(at.Sub(now), func() { c.onTimer(gen) })
}

func (c *SimConn) onTimer(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || gen != c.timerGen {
		return
	}
	c.timer = nil
	now := c.clk.Now()
	c.sendAll(c.sim.Tick(now))
	c.settle(now)
}

func (c *SimConn) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

func (c *SimConn) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}
