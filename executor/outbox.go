package executor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// The outbox holds everything the device owes the lane until the lane says
// it may be released (R5–R8). It lives as long as the process (one epoch):
// a reconnect replaces the session, not the outbox, so resuming is trimming
// it to the new watermarks and sending the rest again under the new gen.
//
// Per instruction it holds a stream: the chunks not yet covered by a
// chunkAck, numbered from 0 and kept byte-identical for retransmission, and
// at most one result, with the deviceSeq it was given once. The session's
// writer pulls frames from it (chunks in order, the result only after every
// chunk of its stream has been sent on this socket), stamping the current
// gen at encoding time.
//
// Back-pressure: a producer (an op's Sink) blocks while its stream holds
// MaxUnackedChunks chunks or MaxUnackedBytes bytes not yet acked, or the
// whole outbox MaxOutboxBytes, until an ack frees room or its context ends.

var errStreamClosed = errors.New("the instruction's output stream is closed (answered, fenced or abandoned)")

type heldChunk struct {
	seq      int64
	kind     protocol.ChunkKind
	buf      *chunkBuf // nil for no data; the outbox's reference
	exitCode int
}

func (c heldChunk) size() int64 { return int64(len(c.buf.bytes())) }

type heldResult struct {
	deviceSeq int64
	outcome   protocol.Outcome
	sends     int       // how many sockets it has been written to
	firstSent time.Time // zero until first sent
	sentHere  bool      // written on the current socket
}

type stream struct {
	id     string
	next   int64 // the next streamSeq to assign
	acked  int64 // the lane's watermark; -1 = nothing accepted
	sent   int64 // the highest streamSeq written on the current socket
	chunks []heldChunk
	bytes  int64
	closed bool // no more chunks: answered or dropped
	result *heldResult
}

type outboxLimits struct {
	maxChunks      int
	maxBytes       int64
	maxTotalBytes  int64
	maxResultSends int
	resultGiveUp   time.Duration
}

type outbox struct {
	lim   outboxLimits
	clock Clock

	mu       sync.Mutex
	streams  map[string]*stream
	order    []string // stream ids, oldest first: the writer's round robin
	cursor   int
	total    int64         // bytes held across streams
	seq      int64         // the next deviceSeq
	space    chan struct{} // closed and replaced when room is freed
	wake     chan struct{} // cap 1: there may be something to send
	peakHeld int64         // the most bytes ever held (for tests and status)
}

func newOutbox(lim outboxLimits, clock Clock) *outbox {
	return &outbox{
		lim: lim, clock: clock,
		streams: map[string]*stream{},
		space:   make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
}

func (o *outbox) notify() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// freed wakes every blocked producer; o.mu is held.
func (o *outbox) freed() {
	close(o.space)
	o.space = make(chan struct{})
}

// open starts the stream of a new instruction.
func (o *outbox) open(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.streams[id]; ok {
		return
	}
	o.streams[id] = &stream{id: id, acked: -1, sent: -1}
	o.order = append(o.order, id)
}

// putChunk appends one chunk to id's stream, blocking while the stream or
// the outbox is over its bound. It copies data (into a pooled buffer).
func (o *outbox) putChunk(ctx context.Context, id string, kind protocol.ChunkKind, data []byte, exitCode int) error {
	for {
		o.mu.Lock()
		s := o.streams[id]
		if s == nil || s.closed {
			o.mu.Unlock()
			return errStreamClosed
		}
		n := int64(len(data))
		room := len(s.chunks) == 0 || // a stream can always make progress by one chunk
			(len(s.chunks) < o.lim.maxChunks && s.bytes+n <= o.lim.maxBytes && o.total+n <= o.lim.maxTotalBytes)
		if room {
			s.chunks = append(s.chunks, heldChunk{seq: s.next, kind: kind, buf: newChunkBuf(data), exitCode: exitCode})
			s.next++
			s.bytes += n
			o.total += n
			o.peakHeld = max(o.peakHeld, o.total)
			o.mu.Unlock()
			if kind != protocol.ChunkExit {
				// An exit chunk is followed at once by its result (Exec
				// returns right after it), whose putResult wakes the
				// writer: both then go out together, and the lane settles
				// the call on one read instead of two.
				o.notify()
			}
			return nil
		}
		space := o.space
		o.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// putResult closes id's stream to chunks and holds its one result, giving it
// its deviceSeq now, once (R6).
func (o *outbox) putResult(id string, out protocol.Outcome) (deviceSeq int64, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.streams[id]
	if s == nil || s.result != nil {
		return 0, false
	}
	s.closed = true
	s.result = &heldResult{deviceSeq: o.seq, outcome: out}
	o.seq++
	o.freed() // a producer blocked on this stream must see it closed
	o.notify()
	return s.result.deviceSeq, true
}

// closeStream refuses further chunks for id (a blocked producer returns).
func (o *outbox) closeStream(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.streams[id]; s != nil && !s.closed {
		s.closed = true
		o.freed()
	}
}

// drop forgets id's stream entirely: acked, fenced or given up.
func (o *outbox) drop(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropLocked(id)
}

func (o *outbox) dropLocked(id string) {
	s := o.streams[id]
	if s == nil {
		return
	}
	o.total -= s.bytes
	releaseChunks(s.chunks)
	s.chunks = nil
	delete(o.streams, id)
	if i := slices.Index(o.order, id); i >= 0 {
		o.order = slices.Delete(o.order, i, i+1)
		if o.cursor > i {
			o.cursor--
		}
	}
	s.closed = true
	o.freed()
}

// chunkAck releases id's chunks at or below upTo (R7). It reports whether
// the ack was consistent: an ack beyond what was sent is clamped.
func (o *outbox) chunkAck(id string, upTo int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.streams[id]
	if s == nil {
		return true // already released: a late or duplicate ack
	}
	ok := upTo < s.next
	upTo = min(upTo, s.next-1)
	if upTo <= s.acked {
		return ok
	}
	o.releaseThrough(s, upTo)
	s.sent = max(s.sent, upTo)
	o.freed()
	return ok
}

// releaseThrough releases s's chunks at or below upTo, the new watermark
// (o.mu held).
func (o *outbox) releaseThrough(s *stream, upTo int64) {
	i := 0
	for i < len(s.chunks) && s.chunks[i].seq <= upTo {
		s.bytes -= s.chunks[i].size()
		o.total -= s.chunks[i].size()
		i++
	}
	releaseChunks(s.chunks[:i])
	s.chunks = slices.Delete(s.chunks, 0, i)
	s.acked = upTo
}

func releaseChunks(cs []heldChunk) {
	for _, c := range cs {
		c.buf.release()
	}
}

// resultAck releases id's stream when it holds a result; false otherwise
// (an ack for nothing held is ignored).
func (o *outbox) resultAck(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.streams[id]
	if s == nil || s.result == nil {
		return false
	}
	o.dropLocked(id)
	return true
}

// resume prepares the outbox for a new socket after the fence: listed
// streams are trimmed to the lane's watermarks (absent = -1) and will be
// sent again from there; unlisted ones must already have been dropped. It
// returns the ids whose held chunks cannot cover the lane's gap (the lane's
// watermark is below chunks already released), which only a lane that
// forgot its own acks can cause.
func (o *outbox) resume(watermarks map[string]int64) (gaps []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.streams {
		wm, ok := watermarks[s.id]
		if !ok {
			wm = -1
		}
		if wm < s.acked {
			gaps = append(gaps, s.id)
		} else if wm > s.acked {
			o.releaseThrough(s, min(wm, s.next-1))
		}
		s.sent = s.acked
		if s.result != nil {
			s.result.sentHere = false
		}
	}
	o.freed()
	o.notify()
	return gaps
}

// pending reports whether anything is held.
func (o *outbox) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.streams)
}

// ids lists the held streams.
func (o *outbox) ids() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.order)
}

// unackedResults counts held results (hello.resuming is informational).
func (o *outbox) unackedResults() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int64
	for _, s := range o.streams {
		if s.result != nil {
			n++
		}
	}
	return n
}

// held reports the bytes held now and the most ever held.
func (o *outbox) held() (now, peak int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total, o.peakHeld
}

// frame is one frame the writer may send. A chunk's data stays valid until
// done is called.
type frame struct {
	chunk  *protocol.Chunk
	buf    *chunkBuf // the writer's reference to the chunk's data
	result *protocol.Result
}

// done gives up the writer's hold on the frame's data.
func (f frame) done() { f.buf.release() }

// pull returns the next frame to write on the socket of generation gen,
// taking streams in turn so one busy stream cannot starve the others. A
// result whose sends reached the bound is given up instead (R5) and its id
// reported in gaveUp.
func (o *outbox) pull(gen protocol.Gen) (f frame, gaveUp []string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.order)
	for k := 0; k < n; k++ {
		i := (o.cursor + k) % n
		s := o.streams[o.order[i]]
		if c, ok := s.unsent(); ok {
			s.sent = c.seq
			o.cursor = (i + 1) % n
			c.buf.retain()
			return frame{chunk: &protocol.Chunk{Gen: gen, InstructionID: s.id, StreamSeq: c.seq, Kind: c.kind, Data: c.buf.bytes(), ExitCode: c.exitCode}, buf: c.buf}, gaveUp, true
		}
		r := s.result
		if r == nil || r.sentHere || s.sent < s.next-1 {
			continue
		}
		if r.sends >= o.lim.maxResultSends {
			gaveUp = append(gaveUp, s.id)
			continue
		}
		r.sentHere = true
		r.sends++
		if r.firstSent.IsZero() {
			r.firstSent = o.clock.Now()
		}
		o.cursor = (i + 1) % n
		return frame{result: &protocol.Result{Gen: gen, InstructionID: s.id, DeviceSeq: r.deviceSeq, Outcome: r.outcome}}, gaveUp, true
	}
	return frame{}, gaveUp, false
}

func (s *stream) unsent() (heldChunk, bool) {
	for _, c := range s.chunks {
		if c.seq > s.sent {
			return c, true
		}
	}
	return heldChunk{}, false
}

// expired lists results first sent longer than resultGiveUp ago and still
// unacked: the lane will never ack them (R5 (c)), so they are given up.
func (o *outbox) expired(now time.Time) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, id := range o.order {
		r := o.streams[id].result
		if r != nil && !r.firstSent.IsZero() && now.Sub(r.firstSent) >= o.lim.resultGiveUp {
			out = append(out, id)
		}
	}
	return out
}

// encode returns the frame's instruction id and wire form; a chunk is
// appended to buf (the writer's reused buffer), a result is not (rare).
func (f frame) encode(buf []byte) (string, []byte, error) {
	if f.chunk != nil {
		b, err := f.chunk.AppendJSON(buf[:0])
		return f.chunk.InstructionID, b, err
	}
	b, err := f.result.MarshalJSON()
	return f.result.InstructionID, b, err
}

// changed returns a channel closed at the next change: an ack, a release, a
// closed stream or an op's end.
func (o *outbox) changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.space
}

// poke signals a change that freed nothing (an op ended).
func (o *outbox) poke() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.freed()
}
