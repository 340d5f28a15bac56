package executor

import (
	"sync"
	"sync/atomic"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// chunkBuf holds the bytes of one chunk while the outbox keeps it for
// retransmission. Buffers come from a pool — a fresh 64 KiB allocation per
// chunk, page faults and all, was a tenth of the CPU of streaming output —
// and are reference-counted so that one is reused only when nobody reads
// it: the outbox holds a reference until the chunk is released (acked,
// trimmed at a resume, or its stream dropped), and the writer one more
// from pulling a chunk until it has encoded it. Whatever the lane acks,
// a frame being encoded keeps its bytes.
type chunkBuf struct {
	b    []byte
	refs atomic.Int32
}

// Two pools: a chunk of a command that prints a little at a time does not
// hold a buffer the size of the largest chunk while it waits for its ack.
var (
	smallChunkBufPool = sync.Pool{New: func() any { return &chunkBuf{b: make([]byte, 0, smallChunkBytes)} }}
	chunkBufPool      = sync.Pool{New: func() any { return &chunkBuf{b: make([]byte, 0, ops.MaxChunkBytes)} }}
)

// smallChunkBytes is the capacity of the small pool's buffers.
const smallChunkBytes = protocol.RecommendedChunkBytes

// newChunkBuf copies p into a pooled buffer with one reference; nil for no
// bytes (an exit chunk).
func newChunkBuf(p []byte) *chunkBuf {
	if len(p) == 0 {
		return nil
	}
	var c *chunkBuf
	switch {
	case len(p) <= smallChunkBytes:
		c = smallChunkBufPool.Get().(*chunkBuf)
	case len(p) <= ops.MaxChunkBytes:
		c = chunkBufPool.Get().(*chunkBuf)
	default:
		c = &chunkBuf{b: make([]byte, 0, len(p))} // never from an op; kept off the pool
	}
	c.b = append(c.b[:0], p...)
	c.refs.Store(1)
	return c
}

// bytes is the chunk's data (nil for none).
func (c *chunkBuf) bytes() []byte {
	if c == nil {
		return nil
	}
	return c.b
}

func (c *chunkBuf) retain() {
	if c != nil {
		c.refs.Add(1)
	}
}

// release drops one reference; the last returns the buffer to the pool.
func (c *chunkBuf) release() {
	if c == nil {
		return
	}
	switch n := c.refs.Add(-1); {
	case n == 0 && cap(c.b) == smallChunkBytes:
		c.b = c.b[:0]
		smallChunkBufPool.Put(c)
	case n == 0 && cap(c.b) == ops.MaxChunkBytes:
		c.b = c.b[:0]
		chunkBufPool.Put(c)
	case n < 0:
		panic("executor: a chunk buffer released more often than retained")
	}
}
