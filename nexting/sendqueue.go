package nexting

import (
	"bytes"
	"sync"
)

// sendQueue is a link's bounded queue of whole frames, shared by the
// stream and BLE links: Send puts a copy in, and the link's writer
// goroutine (run) writes the frames in order. The lock is a leaf.
type sendQueue struct {
	mu     sync.Mutex
	frames [][]byte
	bytes  int
	max    int
	wake   chan struct{} // cap 1: the writer has work
}

func newSendQueue(max int) *sendQueue {
	return &sendQueue{max: max, wake: make(chan struct{}, 1)}
}

// push queues a copy of frame: ErrClosed once stop is closed, ErrQueueFull
// when the queue has no room for it.
func (q *sendQueue) push(frame []byte, stop <-chan struct{}) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-stop:
		return ErrClosed
	default:
	}
	if q.bytes+len(frame) > q.max {
		return ErrQueueFull
	}
	q.frames = append(q.frames, bytes.Clone(frame))
	q.bytes += len(frame)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// clear drops every queued frame (the link has failed).
func (q *sendQueue) clear() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.frames, q.bytes = nil, 0
}

func (q *sendQueue) pop() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.frames) == 0 {
		return nil, false
	}
	f := q.frames[0]
	q.frames[0] = nil
	q.frames = q.frames[1:]
	q.bytes -= len(f)
	return f, true
}

// run is the link's writer: it writes each queued frame with write, in
// order, until stop is closed. A write error is never retried (part of the
// frame may have gone out): fail gets it, and run returns.
func (q *sendQueue) run(stop <-chan struct{}, write func([]byte) error, fail func(error)) {
	for {
		select {
		case <-q.wake:
		case <-stop:
			return
		}
		for f, ok := q.pop(); ok; f, ok = q.pop() {
			if err := write(f); err != nil {
				fail(err)
				return
			}
		}
	}
}
