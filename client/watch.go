package client

import (
	"bytes"
	"context"
	"sync"
	"time"
)

// watcher turns the end of the caller's ctx into a cancel of the
// instruction while its stream is followed. It owns one goroutine, which
// ends when stop is called (after the stream was left).
//
// On ctx's end: an upload whose body is not all sent yet is stopped there
// and the request dropped (the lane has a prefix only, so the device
// writes nothing: it verifies length and digest, §3.4). Otherwise the
// watcher waits for the instruction's id (at most CancelWait), posts the
// cancel and gives the lane CancelWait to settle it; the stream is dropped
// when a wait runs out or the cancel cannot be posted (closing the stream
// cancels the instruction too).
type watcher struct {
	c          *Client
	ctx        context.Context
	abort      context.CancelFunc
	body       *gatedBody // nil: not an upload
	cancelling func()

	mu    sync.Mutex
	id    string
	intr  bool // ctx ended during the call
	short bool // the upload was stopped before all of its body was sent

	idKnown  chan struct{}
	finished chan struct{}
	done     chan struct{}
}

func newWatcher(c *Client, ctx context.Context, abort context.CancelFunc, body *gatedBody, cancelling func()) *watcher {
	w := &watcher{c: c, ctx: ctx, abort: abort, body: body, cancelling: cancelling,
		idKnown: make(chan struct{}), finished: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *watcher) run() {
	defer close(w.done)
	select {
	case <-w.finished:
		return
	case <-w.ctx.Done():
	}
	w.mu.Lock()
	w.intr = true
	w.mu.Unlock()
	if w.cancelling != nil {
		w.cancelling()
	}
	if w.body != nil && !w.body.stop() {
		w.mu.Lock()
		w.short = true
		w.mu.Unlock()
		w.abort()
		return
	}
	t := time.NewTimer(CancelWait)
	defer t.Stop()
	select {
	case <-w.finished:
		return
	case <-t.C:
		w.abort()
		return
	case <-w.idKnown:
	}
	w.mu.Lock()
	id := w.id
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), cancelPostTimeout)
	err := w.c.Cancel(cctx, id)
	cancel()
	if err != nil {
		w.abort()
		return
	}
	t.Reset(CancelWait)
	select {
	case <-w.finished:
	case <-t.C:
		w.abort()
	}
}

// accepted records the instruction's id (once).
func (w *watcher) accepted(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.idKnown:
	default:
		w.id = id
		close(w.idKnown)
	}
}

func (w *watcher) interrupted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.intr
}

func (w *watcher) stoppedShort() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.short
}

// stop ends the watcher's goroutine and waits for it.
func (w *watcher) stop() {
	close(w.finished)
	<-w.done
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
