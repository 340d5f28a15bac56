package executor

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Every byte written reaches the peer, in order, and Close flushes what is
// still buffered before it closes.
func TestCoalescingConnDeliversEverythingInOrderAndFlushesOnClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
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
