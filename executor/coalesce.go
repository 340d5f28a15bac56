package executor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The WebSocket library writes a masked client frame through a 4 KiB
// buffer, flushing every 4 KiB: one write(2) per 4 KiB, which dominated the
// cost of streaming output (a 64 KiB chunk is ~87 KiB on the wire). A
// coalescingConn copies writes into a bounded buffer that one goroutine
// drains in large writes, so the socket sees few, large writes. A small
// write (a whole small frame: a result, an exit chunk, a heartbeat) that
// finds nothing buffered and nothing being written goes straight to the
// socket instead, saving the round trip a goroutine handoff. Order is kept:
// only one write(2) is ever under way, and a write never overtakes buffered
// bytes. Nothing is lost: an error is reported by the next Write and by
// Close, as a buffered writer's is, and Close flushes what is buffered
// first.
type coalescingConn struct {
	net.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // waiting to be written
	spare   []byte
	writing bool  // a write(2) is under way, by drain or a direct Write
	corked  bool  // small writes wait in buf for uncork (cork)
	err     error // the first write error; sticky
	closing bool
	done    chan struct{} // closed when the drain goroutine ends
}

// coalesceLimit bounds the buffered bytes; a writer beyond it waits.
const coalesceLimit = 1 << 20

// directWriteMax: a write shorter than the WebSocket library's buffer is
// the whole (or the last piece) of a frame; it may go straight out.
const directWriteMax = 4 << 10

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, done: make(chan struct{})}
	cc.cond = sync.NewCond(&cc.mu)
	go cc.drain()
	return cc
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && !c.closing && len(c.buf) > 0 && len(c.buf)+len(p) > coalesceLimit {
		c.cond.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closing {
		return 0, net.ErrClosed
	}
	if c.corked && len(p) < directWriteMax {
		c.buf = append(c.buf, p...) // uncork writes it, with what follows
		return len(p), nil
	}
	if len(p) < directWriteMax && len(c.buf) == 0 && !c.writing {
		return c.writeDirect(p)
	}
	c.buf = append(c.buf, p...)
	c.cond.Broadcast()
	return len(p), nil
}

// cork holds small writes (whole small frames, the ends of large ones) in
// the buffer until uncork, so that frames the writer has ready one after
// another (an exit chunk and its result) leave in one write(2) and reach
// the lane in one read. Large writes still wake the drain, which writes
// everything buffered before them, so order is kept and a cork never holds
// more than a few small frames.
func (c *coalescingConn) cork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = true
}

// uncork ends a cork and writes what it held: here, when no other write is
// under way and the bytes are few (the wake of the drain goroutine would
// cost more than the write), else through the drain. An error is reported
// as a Write's is.
func (c *coalescingConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	if c.writing || len(c.buf) >= directWriteMax {
		c.cond.Broadcast()
		return nil
	}
	p := c.buf
	c.buf, c.spare = c.spare[:0], nil
	_, err := c.writeDirect(p)
	if c.spare == nil {
		c.spare = p[:0]
	}
	return err
}

// writeDirect writes p itself (c.mu held; released during the write).
func (c *coalescingConn) writeDirect(p []byte) (int, error) {
	c.writing = true
	c.mu.Unlock()
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.writing = false
	if err != nil && c.err == nil {
		c.err = err
	}
	c.cond.Broadcast()
	return n, err
}

// drain owns the socket's buffered writes until Close or an error.
func (c *coalescingConn) drain() {
	defer close(c.done)
	for {
		c.mu.Lock()
		// Wait while a write is under way, or there is nothing to write
		// and no Close to finish.
		for c.err == nil && (c.writing || (len(c.buf) == 0 && !c.closing)) {
			c.cond.Wait()
		}
		if c.err != nil || (len(c.buf) == 0 && c.closing) {
			c.mu.Unlock()
			return
		}
		batch := c.buf
		c.buf, c.spare = c.spare[:0], nil
		c.writing = true
		c.mu.Unlock()
		_, err := c.Conn.Write(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		c.writing = false
		if err != nil && c.err == nil {
			c.err = err
		}
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// closeFlushTimeout bounds how long Close waits for buffered bytes to be
// written to a peer that is not reading.
const closeFlushTimeout = 5 * time.Second

// Close writes what is buffered (for at most closeFlushTimeout), then
// closes the socket.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.cond.Broadcast()
	c.mu.Unlock()
	flushed := time.NewTimer(closeFlushTimeout)
	defer flushed.Stop()
	select {
	case <-c.done:
	case <-flushed.C:
	}
	err := c.Conn.Close() // unblocks a drain stuck in Write
	<-c.done
	return err
}

// deadPeerTimeout: how long the lane's host may leave the executor's bytes
// unacknowledged before the socket is given up (setDeadPeerTimeout). A
// live peer's kernel acknowledges within a round trip, whatever its load.
const deadPeerTimeout = 60 * time.Second

// dialedKey is the context key under which a WebSocket dial is handed an
// *atomic.Pointer[coalescingConn] to store the connection it made, so that
// the session's writer can cork it (withDialedConn).
type dialedKey struct{}

// withDialedConn returns ctx carrying slot for the dial's connection.
func withDialedConn(ctx context.Context, slot *atomic.Pointer[coalescingConn]) context.Context {
	return context.WithValue(ctx, dialedKey{}, slot)
}

// wsHTTPClient is base with its dialer wrapped in coalescingConn (and the
// dead-peer timeout set), for the WebSocket dial only; a base whose
// transport is not an *http.Transport is used as it is.
func wsHTTPClient(base *http.Client) *http.Client {
	t, ok := base.Transport.(*http.Transport)
	if base.Transport == nil {
		t, ok = http.DefaultTransport.(*http.Transport), true
	}
	if !ok {
		return base
	}
	t = t.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := setDeadPeerTimeout(conn, deadPeerTimeout); err != nil {
			conn.Close()
			return nil, fmt.Errorf("setting TCP_USER_TIMEOUT on the lane socket: %w", err)
		}
		cc := newCoalescingConn(conn)
		if slot, ok := ctx.Value(dialedKey{}).(*atomic.Pointer[coalescingConn]); ok {
			slot.Store(cc)
		}
		return cc, nil
	}
	c := *base
	c.Transport = t
	return &c
}
