package executor

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
)

// Every byte written reaches the peer, in order, and Close flushes what is
// still buffered before it closes.
func TestCoalescingConnDeliversEverythingInOrderAndFlushesOnClose(t *testing.T) {
	raw, got := dialPeer(t, func(c net.Conn) []byte { b, _ := io.ReadAll(c); return b })
	c := newCoalescingConn(raw)
	var want bytes.Buffer
	for i := range 3000 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%4096) // many small writes, past the buffer bound
		want.Write(p)
		if n, err := c.Write(p); err != nil || n != len(p) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the peer got %d bytes, want %d, or not in order", len(b), want.Len())
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("a write after Close succeeded")
	}
}

// A failed socket write is reported by the next Write: nothing is lost
// silently.
func TestCoalescingConnReportsAWriteError(t *testing.T) {
	a, b := net.Pipe()
	c := newCoalescingConn(a)
	b.Close() // the peer is gone: the drain's write fails
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = c.Write(make([]byte, 64<<10))
	}
	if err == nil {
		t.Fatal("writes kept succeeding after the socket failed")
	}
	c.Close()
}

// failConn fails every write after the first n bytes.
type failConn struct {
	net.Conn
	mu   sync.Mutex
	left int
}

var errBroken = errors.New("broken pipe (test)")

func (f *failConn) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(p) > f.left {
		return 0, errBroken
	}
	f.left -= len(p)
	return len(p), nil
}

func (f *failConn) Close() error { return nil }

// A write error is sticky: the Write that meets it or the next one reports
// it, and so does every later Write; nothing is written after it.
func TestCoalescingConnReportsAWriteErrorToEveryLaterWrite(t *testing.T) {
	for _, size := range []int{10, 4096, 100000} {
		fc := &failConn{left: 5}
		cc := newCoalescingConn(fc)
		var err error
		// Buffered writes stop at the 1 MiB bound until the drain has met
		// the error, so this loop ends with it.
		for i := 0; i < 1e6 && err == nil; i++ {
			_, err = cc.Write(make([]byte, size))
		}
		if !errors.Is(err, errBroken) {
			t.Fatalf("writes of %d bytes: %v, want the connection's error", size, err)
		}
		if _, err := cc.Write([]byte("x")); !errors.Is(err, errBroken) {
			t.Fatalf("a write after the error: %v", err)
		}
		cc.Close()
	}
}

// writeRecorder is a net.Conn that records each write(2) it is given.
type writeRecorder struct {
	net.Conn // nil: only Write and Close are used
	mu       sync.Mutex
	writes   [][]byte
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func (w *writeRecorder) Close() error { return nil }

func (w *writeRecorder) recorded() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// Small frames written while corked leave in one write at uncork: an exit
// chunk and its result reach the lane in one read.
func TestCorkedSmallWritesLeaveInOneWriteAtUncork(t *testing.T) {
	w := &writeRecorder{}
	c := newCoalescingConn(w)
	defer c.Close()
	c.cork()
	for _, p := range []string{"exit chunk,", "result"} {
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.recorded(); len(got) != 0 {
		t.Fatalf("written while corked: %q", got)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if got := w.recorded(); len(got) != 1 || string(got[0]) != "exit chunk,result" {
		t.Fatalf("writes at uncork %q, want one of both frames", got)
	}
	// Uncorked, a small write goes straight out again.
	if _, err := c.Write([]byte("heartbeat")); err != nil {
		t.Fatal(err)
	}
	if got := w.recorded(); len(got) != 2 || string(got[1]) != "heartbeat" {
		t.Fatalf("writes %q, want the heartbeat written at once", got)
	}
}

// A large write while corked is not held: it goes out, after the small
// ones before it, in order.
func TestACorkNeverHoldsALargeWrite(t *testing.T) {
	large := bytes.Repeat([]byte("L"), 3*directWriteMax)
	raw, got := dialPeer(t, func(c net.Conn) []byte {
		b := make([]byte, len("small")+len(large))
		if _, err := io.ReadFull(c, b); err != nil { // returns only if nothing is held back
			return nil
		}
		return b
	})
	c := newCoalescingConn(raw)
	defer c.Close()
	c.cork()
	for _, p := range [][]byte{[]byte("small"), large} {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if b := <-got; !bytes.Equal(b, append([]byte("small"), large...)) {
		t.Fatalf("the peer got %d bytes while corked, want the small write then the large one", len(b))
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
}

// dialPeer connects to a loopback peer that sends what read returns from
// its side of the connection on the channel.
func dialPeer(t *testing.T, read func(net.Conn) []byte) (net.Conn, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		got <- read(c)
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return raw, got
}
