package ops

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// The output of a command travels pipe -> pipeReader (one goroutine per
// stream) -> emitter (one goroutine, the only caller of Sink.Data) -> Sink.
// Each reader owns readBuffers buffers of MaxChunkBytes that circulate
// between it and the emitter, so memory is bounded and a slow Sink blocks
// the reader, which fills the pipe, which blocks the command: backpressure
// all the way down.

const (
	// flushInterval is the longest a byte waits in the emitter for more to
	// join it in a chunk: a command that prints a little at a time yields at
	// most one chunk per stream per interval, never a flood of tiny ones.
	flushInterval = 5 * time.Millisecond

	// readBuffers is the number of read buffers per stream.
	readBuffers = 2

	// drainIdle: once the process group is dead, a read that blocks this
	// long means the pipe is held open by a process that left the group
	// (setsid, a daemon). No more output of the command can arrive; the
	// reader stops.
	drainIdle = 50 * time.Millisecond

	// drainBudget bounds what a reader takes from the pipe after the group
	// is dead. Output written before the group died is at most a pipe's
	// capacity (Linux: 64 KiB by default, fs.pipe-max-size = 1 MiB); more
	// than that comes from a process that escaped the group and keeps
	// writing. The reader stops and reports the stream truncated.
	drainBudget = 1 << 20
)

// chunkBufPool holds MaxChunkBytes buffers for readers and coalescing.
var chunkBufPool = sync.Pool{New: func() any { return new([MaxChunkBytes]byte) }}

// pipeReader reads one stream's pipe until EOF, handing filled buffers to
// the emitter on out (closed when the reader ends).
type pipeReader struct {
	f    *os.File
	out  chan []byte // filled buffers, in pipe order
	free chan []byte // buffers back from the emitter
	bufs [readBuffers]*[MaxChunkBytes]byte

	// drain is set, then the read deadline is moved to now, once the
	// process group is dead (startDrain).
	drain atomic.Bool
	// lost is set before out is closed when the reader stopped with the
	// command's output possibly incomplete: the drain budget ran out or a
	// read failed.
	lost bool
}

func newPipeReader(f *os.File) *pipeReader {
	r := &pipeReader{
		f:    f,
		out:  make(chan []byte, readBuffers),
		free: make(chan []byte, readBuffers),
	}
	for i := range r.bufs {
		r.bufs[i] = chunkBufPool.Get().(*[MaxChunkBytes]byte)
		r.free <- r.bufs[i][:]
	}
	return r
}

// run reads until EOF (every writer closed the pipe), a read error, or, in
// drain mode, an idle pipe or an exhausted budget.
func (r *pipeReader) run() {
	defer close(r.out)
	draining := false
	var drained int64
	for {
		buf := <-r.free
		if draining {
			_ = r.f.SetReadDeadline(time.Now().Add(drainIdle))
		}
		n, err := r.f.Read(buf[:cap(buf)])
		if n > 0 {
			r.out <- buf[:n]
			if draining {
				if drained += int64(n); drained > drainBudget {
					r.lost = true
					return
				}
			}
		} else {
			r.free <- buf // never blocks: free has room for every buffer
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Only startDrain sets a deadline before drain mode, and it
			// stores drain first.
			if draining {
				return // idle: a process outside the group holds the pipe
			}
			draining = r.drain.Load()
		case err == io.EOF:
			return
		default:
			r.lost = true
			return
		}
	}
}

// startDrain switches the reader to drain mode: from now on it stops when
// the pipe stays idle or the budget runs out. Called once the process group
// is dead (or given up on), so a descendant that escaped the group and holds
// the pipe cannot keep the exec from finishing.
func (r *pipeReader) startDrain() {
	r.drain.Store(true)
	_ = r.f.SetReadDeadline(time.Now()) // wake a blocked Read
}

// putBuffers returns the reader's buffers to the pool; the reader and the
// emitter must both have ended.
func (r *pipeReader) putBuffers() {
	for i, b := range r.bufs {
		chunkBufPool.Put(b)
		r.bufs[i] = nil
	}
}

// outStream is the emitter's state for one of stdout and stderr.
type outStream struct {
	kind      protocol.ChunkKind
	pending   []byte // coalescing buffer, shorter than MaxChunkBytes between calls
	pbuf      *[MaxChunkBytes]byte
	accepted  int64 // bytes admitted under the cap
	truncated bool  // bytes were dropped at the cap
}

// emitter coalesces both streams into chunks and is the only goroutine that
// calls Sink.Data. It enforces the per-stream cap.
type emitter struct {
	sink  Sink
	limit int64

	// discard stops all further Sink calls: set by the emitter when the sink
	// fails, and by Exec when the outcome will not be an exec outcome
	// (cancel, abort), so an answer is not held up by output nobody needs.
	discard atomic.Bool
	failed  chan struct{} // closed on the first Sink error
	done    chan struct{} // closed when run returns; err and streams are then final

	err     error // the first Sink error
	streams [2]outStream
}

func newEmitter(sink Sink, limit int64) *emitter {
	return &emitter{
		sink:    sink,
		limit:   limit,
		failed:  make(chan struct{}),
		done:    make(chan struct{}),
		streams: [2]outStream{{kind: protocol.ChunkStdout}, {kind: protocol.ChunkStderr}},
	}
}

// run consumes both readers until both have ended, then flushes.
func (e *emitter) run(stdout, stderr *pipeReader) {
	defer close(e.done)
	defer e.putBuffers()
	timer := time.NewTimer(flushInterval)
	timer.Stop()
	defer timer.Stop()
	armed := false
	in := [2]chan []byte{stdout.out, stderr.out}
	for in[0] != nil || in[1] != nil {
		select {
		case p, ok := <-in[0]:
			if !ok {
				in[0] = nil
				continue
			}
			e.take(0, p)
			stdout.free <- p
		case p, ok := <-in[1]:
			if !ok {
				in[1] = nil
				continue
			}
			e.take(1, p)
			stderr.free <- p
		case <-timer.C:
			armed = false
			e.flush()
			continue
		}
		if !armed && (len(e.streams[0].pending) > 0 || len(e.streams[1].pending) > 0) {
			timer.Reset(flushInterval)
			armed = true
		}
	}
	e.flush()
}

// take admits p (one read of stream i) under the cap and emits every full
// chunk; the remainder waits in pending for more or for the timer.
func (e *emitter) take(i int, p []byte) {
	s := &e.streams[i]
	if room := e.limit - s.accepted; int64(len(p)) > room {
		p = p[:max(room, 0)]
		s.truncated = true
	}
	s.accepted += int64(len(p))
	for len(p) > 0 && !e.discard.Load() {
		if len(s.pending) == 0 && len(p) >= MaxChunkBytes {
			e.emit(s, p[:MaxChunkBytes]) // a full read: no copy
			p = p[MaxChunkBytes:]
			continue
		}
		if s.pbuf == nil {
			s.pbuf = chunkBufPool.Get().(*[MaxChunkBytes]byte)
			s.pending = s.pbuf[:0]
		}
		n := copy(s.pbuf[len(s.pending):], p)
		s.pending = s.pending[:len(s.pending)+n]
		p = p[n:]
		if len(s.pending) == MaxChunkBytes {
			e.emit(s, s.pending)
			s.pending = s.pending[:0]
		}
	}
}

// flush emits whatever is pending on both streams.
func (e *emitter) flush() {
	for i := range e.streams {
		s := &e.streams[i]
		if len(s.pending) > 0 {
			e.emit(s, s.pending)
			s.pending = s.pending[:0]
		}
	}
}

// emit hands one non-empty chunk to the sink, unless output is discarded.
func (e *emitter) emit(s *outStream, p []byte) {
	if len(p) == 0 || e.discard.Load() {
		return
	}
	if err := e.sink.Data(s.kind, p); err != nil {
		e.err = err
		e.discard.Store(true)
		close(e.failed)
	}
}

func (e *emitter) putBuffers() {
	for i := range e.streams {
		s := &e.streams[i]
		if s.pbuf != nil {
			chunkBufPool.Put(s.pbuf)
			s.pbuf, s.pending = nil, nil
		}
	}
}
