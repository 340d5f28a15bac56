// Package wsmsg reads whole WebSocket messages into buffers the caller
// reuses. websocket.Conn.Read returns a fresh slice grown by io.ReadAll from
// 512 bytes for every message — for the 87 KB frame that carries 64 KiB of
// output that is eight allocations and as many copies, which cost the lane
// about a fifth of its CPU per streamed byte. Read fills a buffer that
// already has room; Pool hands such buffers between goroutines.
package wsmsg

import (
	"context"
	"io"
	"sync"

	"github.com/coder/websocket"
)

// Read reads the next message into buf[:0], growing it when the message
// does not fit, and returns the message type and the filled buffer. The
// connection's read limit applies as it does to Conn.Read (an oversized
// message fails and closes the socket with 1009). On error the returned
// buffer is still buf's storage, for reuse.
func Read(ctx context.Context, c *websocket.Conn, buf []byte) (websocket.MessageType, []byte, error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return 0, buf[:0], err
	}
	buf, err = readAll(r, buf[:0])
	return typ, buf, err
}

func readAll(r io.Reader, buf []byte) ([]byte, error) {
	var probe [1]byte
	for {
		var n int
		var err error
		if len(buf) < cap(buf) {
			n, err = r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
		} else {
			// Full: grow only if the message goes on (an exact fit does not).
			n, err = r.Read(probe[:])
			buf = append(buf, probe[:n]...)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Pool holds message buffers for reuse across goroutines: a reader takes
// one, hands the filled buffer to whoever decodes it, who puts it back.
// Buffers keep their capacity, so after the first large frame a stream of
// them reads without allocating.
type Pool struct {
	p sync.Pool
}

// initialCap covers every control frame; data frames grow a buffer once.
const initialCap = 1 << 10

// Get returns an empty buffer.
func (p *Pool) Get() *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, initialCap)
	return &b
}

// Put returns b to the pool; nothing may use it afterwards.
func (p *Pool) Put(b *[]byte) {
	p.p.Put(b)
}

// Read waits for the next message and only then takes a buffer for it, so
// a socket waiting for its next message (an idle device, most of the time)
// holds none. The caller puts the buffer back once it is done with it; on
// error there is none.
func (p *Pool) Read(ctx context.Context, c *websocket.Conn) (websocket.MessageType, *[]byte, error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	b := p.Get()
	*b, err = readAll(r, *b)
	if err != nil {
		p.Put(b)
		return 0, nil, err
	}
	return typ, b, nil
}
