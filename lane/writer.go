package lane

import (
	"context"
	"sync"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/protocol"
)

// The socket's only writer: one goroutine per connection (at most one,
// see below) drains a bounded queue of encoded frames, in the order they
// were queued (the executor's
// writeLoop, yamux's sendLoop). Producers encode and queue; they never
// write, never wait for a write, and never hold the device's lock while the
// socket is written. The order of the queue is the order of §2:
//
//   - challenge is queued before the first read, helloAck under the
//     device's lock in the same step that attaches the connection, so it
//     precedes every ack and every dispatch (§1.5);
//   - instruction frames are queued by pump under the device's lock, in
//     issuedSeq order, exactly once (R1); a write's payload parts follow its
//     instruction frame, and a cancel, queued after its instruction, can
//     never overtake it;
//   - resultAck and chunkAck are queued after the frame they answer was
//     accepted, in the order the device's frames were handled;
//   - bye and helloReject are last: nothing is taken after them, and the
//     socket closes once they are written.
//
// Each write is bounded by Config.WriteTimeout: a device that does not
// take a frame in that time is closed, and its in-flight work takes the
// disconnect path (reconnect grace, R4). A frame is never dropped while the
// connection lives; when the queue cannot take one, see send and sendPart
// for who waits and who closes.
//
// The write loop lives while the connection has work: it is started by the
// first frame queued to a connection that has none running, and it parks
// (returns) once its queue is empty and no instruction is in flight on the
// device. While calls are in flight it stays, whatever the traffic, so a
// frame never costs a goroutine; an idle device costs none (its reader is
// its only goroutine), which keeps the idle connection small. At most one
// loop runs per connection: the socket has one writer.
//
// coder/websocket flushes each message to the socket as it is written, so
// a batch taken from the queue costs one lock and one wake-up but still one
// write call per frame; the queue hands the loop every frame that is
// waiting, which is where a transport that can gather writes would coalesce
// them.

// queueBound is how many frames may wait for the socket before the device
// counts as not reading. Instruction and cancel frames are bounded by
// maxInflight; acknowledgements answer the device's own frames, and our
// executor holds at most 32 chunks unacknowledged per instruction (backlog.go)
// and re-sends them once per reconnect: 80 per in-flight slot covers that
// with room, and only a device that stops reading its socket reaches it.
func queueBound(maxInflight int) int { return max(1024, 80*maxInflight) }

// payloadWindow is how many payload frames of a connection may be encoded
// and waiting at once: one being written while the next is encoded. It
// bounds the content a connection holds in memory to two parts.
const payloadWindow = 2

// outFrame is one encoded frame. pooled, when set, is b's buffer, returned
// to messageBuffers once the frame is written or discarded.
type outFrame struct {
	b       []byte
	pooled  *[]byte
	payload bool
}

func (f *outFrame) release() {
	if f.pooled != nil {
		*f.pooled = f.b[:0] // keep the grown capacity
		messageBuffers.Put(f.pooled)
	}
	*f = outFrame{}
}

type writerState uint8

const (
	writerOpen      writerState = iota
	writerFinishing             // takes nothing more; writes what is queued, then closes the socket
	writerClosed                // takes nothing more; what is queued is discarded
)

// writer is the queue between a connection's producers and its write loop.
type writer struct {
	mu       sync.Mutex
	state    writerState
	queue    []outFrame
	payloads int // payload frames queued or being written
	bound    int
	running  bool           // a write loop runs
	loops    sync.WaitGroup // the write loops started; cleanup waits for them
	wake     chan struct{}  // capacity 1: the loop has something to do
	room     chan struct{}  // closed when a payload frame was written; nil while nobody waits
}

func (w *writer) init(bound int) {
	w.bound, w.wake = bound, make(chan struct{}, 1)
}

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// put queues f. It reports false, and releases f, when the writer takes
// nothing more, or when a control frame finds the queue at its bound
// (full is then true). start says no loop runs: the caller starts one
// (counted in loops here, before the writer can be shut and waited for).
func (w *writer) put(f outFrame, last bool) (ok, full, start bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.state != writerOpen:
		f.release()
		return false, false, false
	case !f.payload && len(w.queue) >= w.bound:
		f.release()
		return false, true, false
	}
	w.queue = append(w.queue, f)
	if last {
		w.state = writerFinishing
	}
	if w.running {
		w.signal()
		return true, false, false
	}
	w.running = true
	w.loops.Add(1)
	return true, false, true
}

// park ends the running loop if nothing is queued and the connection is
// idle (computed by the loop before: a frame queued since is seen here, and
// one queued after starts a new loop).
func (w *writer) park(idle bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !idle || len(w.queue) > 0 || w.state != writerOpen {
		return false
	}
	w.running = false
	return true
}

// reservePayload takes a place in the payload window for a frame about to
// be encoded (put then queues it; written gives the place back), or returns
// a channel closed when a place may have freed; closed reports the writer
// takes nothing more.
func (w *writer) reservePayload() (room <-chan struct{}, ok, closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.state != writerOpen:
		return nil, false, true
	case w.payloads < payloadWindow:
		w.payloads++
		return nil, true, false
	}
	if w.room == nil {
		w.room = make(chan struct{})
	}
	return w.room, false, false
}

// take moves every queued frame into batch (reused) and reports whether the
// loop is to end after writing them.
func (w *writer) take(batch []outFrame) ([]outFrame, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == writerClosed {
		return batch, true
	}
	batch = append(batch, w.queue...)
	clear(w.queue)
	w.queue = w.queue[:0]
	if cap(w.queue) > 64 {
		w.queue = nil // a burst does not stay allocated on an idle connection
	}
	return batch, w.state == writerFinishing
}

// written gives back a payload frame's place in the window.
func (w *writer) written() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.payloads--
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
}

// shut makes the writer take nothing more and discards what is queued.
func (w *writer) shut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state = writerClosed
	for i := range w.queue {
		w.queue[i].release()
	}
	w.queue = nil
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
	w.signal()
}

// writeLoop is the connection's write goroutine, started by the frame that
// finds none running (enqueue) and waited for by cleanup. It parks when the
// connection is idle; it ends when a write fails or the connection is
// closed, and after the last frame (bye, helloReject), when it ends the
// connection's context: the reader's read ends with it, which closes the
// socket, and cleanup runs.
func (c *conn) writeLoop() {
	w := &c.w
	defer w.loops.Done()
	var batch []outFrame
	for {
		var last bool
		batch, last = w.take(batch[:0])
		for i := range batch {
			if err := c.writeFrame(&batch[i]); err != nil {
				for j := i; j < len(batch); j++ {
					batch[j].release()
				}
				c.close()
				return
			}
		}
		if cap(batch) > 64 {
			batch = nil
		}
		if last {
			c.cancel()
			return
		}
		if len(batch) > 0 {
			continue // more may have been queued meanwhile
		}
		if w.park(c.idle()) {
			return
		}
		select {
		case <-w.wake:
		case <-c.ctx.Done():
			return
		}
	}
}

// writeFrame writes one frame within the write timeout and releases it.
func (c *conn) writeFrame(f *outFrame) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.WriteTimeout)
	probe.Mark(probe.LaneFrameWrite) // before: the device may read it before Write returns
	err := c.ws.Write(ctx, websocket.MessageText, f.b)
	cancel()
	payload := f.payload
	f.release()
	if payload {
		c.w.written()
	}
	return err
}

// send encodes f and queues it. It never waits: the producers of control
// frames (challenge, helloAck, instruction, cancel, resultAck, chunkAck)
// hold the device's lock, or read the socket, or are a caller's Next, and
// none may stall behind a socket. Nor may the frame be dropped: a lost ack
// stalls a stream or a result, a lost cancel strands its call, a lost
// instruction frame leaves a committed call unsent. So a frame the queue
// cannot take because it is at its bound (queueBound: only a device that
// has stopped reading gets there) closes the connection, and its work takes
// the disconnect path, the spec's honest outcome for it (R4: reconnect
// grace, then outcome_unknown; R1: a committed call is never re-sent). It
// reports whether f was queued: false also once the connection is ending,
// when nothing more is written on it anyway.
func (c *conn) send(f frameMarshaler) bool { return c.queue(f, false) }

// sendLast queues f as the socket's last frame (bye, helloReject): nothing
// is taken after it, and the socket closes once it is written (R13, §1.4).
func (c *conn) sendLast(f frameMarshaler) bool { return c.queue(f, true) }

func (c *conn) queue(f frameMarshaler, last bool) bool {
	b, err := f.MarshalJSON()
	if err != nil {
		c.unencodable(err)
		return false
	}
	ok, full := c.enqueue(outFrame{b: b}, last)
	if full {
		c.srv.log.Warn("lane: the device is not reading its socket; closing it", "device", c.deviceID, "queued", c.w.bound)
		c.close()
	}
	return ok
}

// sendPart encodes a payload frame and queues it, waiting while the
// payload window is full: the payload is the one frame kind whose producer
// (a write's payload goroutine, send.go) holds no lock and may wait, and
// waiting is what paces the reading of a streamed content by the socket.
// It reports false once the connection is ending.
func (c *conn) sendPart(p *protocol.Payload) bool {
	for {
		room, ok, closed := c.w.reservePayload()
		if closed {
			return false
		}
		if ok {
			break
		}
		select {
		case <-room:
		case <-c.ctx.Done():
			return false
		}
	}
	buf := messageBuffers.Get()
	b, err := p.AppendJSON(*buf)
	if err != nil {
		messageBuffers.Put(buf)
		c.w.written()
		c.unencodable(err)
		return false
	}
	ok, _ := c.enqueue(outFrame{b: b, pooled: buf, payload: true}, false)
	return ok
}

// enqueue puts f in the writer's queue and starts the write loop if none
// runs.
func (c *conn) enqueue(f outFrame, last bool) (ok, full bool) {
	ok, full, start := c.w.put(f, last)
	if start {
		go c.writeLoop()
	}
	return ok, full
}

// idle reports whether the connection has no instruction in flight: its
// write loop may park. Before the attach there is none.
func (c *conn) idle() bool {
	d := c.dev.Load()
	return d == nil || d.inflight.Load() == 0
}

// unencodable closes a connection on which a frame could not be encoded: a
// bug, and a frame the protocol owes the device cannot silently go missing.
func (c *conn) unencodable(err error) {
	c.srv.log.Error("lane: a frame failed to encode; closing the connection", "device", c.deviceID, "err", err)
	c.close()
}

// close ends the connection at once, from any goroutine, holding any lock:
// the writer takes nothing more and discards what is queued, a write in
// progress is abandoned, and the write loop closes the socket, which ends
// the reader and then cleanup. (The close handshake is not waited for: the
// frames that say why, bye and helloReject, are written before it.)
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.w.shut()
		c.cancel()
	})
}
