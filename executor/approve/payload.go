package approve

import (
	"context"

	"github.com/sema-agent/sema/protocol"
)

// MaxHeldPayloadBytes bounds the payload a write waiting for approval
// holds in memory. Up to it, the connection's reader hands a held write's
// payload frames over without waiting for the person; past it, it waits
// (as it would for a slow op) until the decision.
const MaxHeldPayloadBytes = 32 << 20

// held drains a write's payload channel while the person decides, so that
// the executor's socket reader, which feeds that channel and blocks when it
// is full, never waits on a held instruction.
type held struct {
	src    <-chan *protocol.Payload
	buf    []*protocol.Payload
	ended  bool // src was closed
	stop   chan struct{}
	done   chan struct{}
	fwDone chan struct{} // the forwarder's, once released
}

func holdPayload(src <-chan *protocol.Payload, max int) *held {
	h := &held{src: src, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		n := 0
		for n < max {
			select {
			case p, ok := <-src:
				if !ok {
					h.ended = true
					return
				}
				h.buf = append(h.buf, p)
				n += len(p.Data)
			case <-h.stop:
				return
			}
		}
	}()
	return h
}

// drop stops holding (a refused write: its frames are not needed).
func (h *held) drop() {
	close(h.stop)
	<-h.done
	h.buf = nil
}

// release stops holding and returns the payload channel for the op: the
// held frames, then the rest of the original channel, closed when it is.
// The forwarding goroutine ends when the original channel ends or ctx
// does; wait waits for it.
func (h *held) release(ctx context.Context) (payload <-chan *protocol.Payload, wait func()) {
	close(h.stop)
	<-h.done
	out := make(chan *protocol.Payload)
	h.fwDone = make(chan struct{})
	go func() {
		defer close(h.fwDone)
		defer close(out)
		for _, p := range h.buf {
			select {
			case out <- p:
			case <-ctx.Done():
				return
			}
		}
		h.buf = nil
		if h.ended {
			return
		}
		for {
			select {
			case p, ok := <-h.src:
				if !ok {
					return
				}
				select {
				case out <- p:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, func() { <-h.fwDone }
}
