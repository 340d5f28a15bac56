package nexting

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Conn is one connection to a peer, as the session and the simulator driver
// use it: received bytes come out as framed Results, frames go in whole.
// Stream (any byte stream) and BLEConn (a GATT link) implement it.
type Conn interface {
	// Results yields every complete frame and framing error received, in
	// order. It is closed when the connection ends; Err then says why.
	Results() <-chan Result
	// Send queues one whole frame (one JSON object and its LF, already
	// validated) for writing. It never blocks: it fails with ErrQueueFull
	// when the bounded queue has no room and ErrClosed after the end.
	Send(frame []byte) error
	// Close ends the connection and waits for its goroutines. Idempotent.
	// It must not wait for the consumer of Results (a Session calls it
	// while holding its lock), nor block on the peer.
	Close() error
	// Err is why the connection ended (io.EOF when the peer closed it,
	// ErrClosed after Close), or nil while it runs.
	Err() error
}

// Errors of a Conn.
var (
	ErrClosed    = errors.New("nexting: connection closed")
	ErrQueueFull = errors.New("nexting: send queue full")
)

// StreamConfig tunes a Stream. The zero value is usable.
type StreamConfig struct {
	// Framer reassembles received frames; give it the negotiated limit
	// (Negotiated.NewFramer). nil means a Framer of MaxFrameBytes.
	Framer *Framer
	// Buffered holds bytes read from the stream before the Stream took
	// over (what followed the Device Info line); they are framed first.
	Buffered []byte
	// ReadSize is the size of each Read, so the Framer is fed bounded
	// chunks; 0 means 512.
	ReadSize int
	// MaxQueuedBytes bounds the frames queued for writing; 0 means 64 KiB.
	MaxQueuedBytes int
}

// Stream is a Conn over a byte stream: a unix socket, a TCP connection, a
// serial port — any io.ReadWriter. It owns two goroutines, started by
// NewStream and ended by Close or by a read or write error:
//
//   - the reader reads chunks of ReadSize, feeds them to the Framer and
//     delivers each Result on Results (blocking: a slow consumer slows
//     reading, so the peer sees backpressure). At the end of the stream it
//     clears the Framer: a partial frame is never delivered.
//   - the writer writes each queued frame with one Write call.
//
// Either goroutine's failure stops both: the stream is closed (if rw is an
// io.Closer) so a blocked Read or Write returns. Close does the same and
// waits for both; if rw is not an io.Closer, Close waits until the pending
// Read returns.
type Stream struct {
	rw     io.ReadWriter
	framer *Framer

	results chan Result

	out *sendQueue // frames not yet written

	mu        sync.Mutex
	stop      chan struct{} // closed once, by fail
	stopOnce  sync.Once
	err       error // guarded by mu; set once, before stop closes
	readDone  chan struct{}
	writeDone chan struct{}
}

// NewStream starts a Stream over rw.
func NewStream(rw io.ReadWriter, cfg StreamConfig) *Stream {
	if cfg.Framer == nil {
		cfg.Framer = &Framer{max: MaxFrameBytes}
	}
	if cfg.ReadSize <= 0 {
		cfg.ReadSize = 512
	}
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = 64 << 10
	}
	s := &Stream{
		rw:        rw,
		framer:    cfg.Framer,
		results:   make(chan Result),
		out:       newSendQueue(cfg.MaxQueuedBytes),
		stop:      make(chan struct{}),
		readDone:  make(chan struct{}),
		writeDone: make(chan struct{}),
	}
	buffered := bytes.Clone(cfg.Buffered)
	go s.readLoop(buffered, cfg.ReadSize)
	go s.writeLoop()
	return s
}

// Results implements Conn.
func (s *Stream) Results() <-chan Result { return s.results }

// Done is closed as soon as the stream has ended (before its goroutines
// have necessarily returned; Close waits for them).
func (s *Stream) Done() <-chan struct{} { return s.stop }

// Send implements Conn. frame must be non-empty and end with its only LF.
func (s *Stream) Send(frame []byte) error {
	if err := checkFrameShape(frame); err != nil {
		return err
	}
	return s.out.push(frame, s.stop)
}

// Close implements Conn.
func (s *Stream) Close() error {
	s.fail(ErrClosed)
	<-s.readDone
	<-s.writeDone
	return nil
}

// Err implements Conn.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// fail records the first cause, stops both goroutines and closes rw.
func (s *Stream) fail(err error) {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		s.out.clear()
		close(s.stop)
		if c, ok := s.rw.(io.Closer); ok {
			_ = c.Close()
		}
	})
}

func (s *Stream) readLoop(buffered []byte, size int) {
	defer close(s.readDone)
	defer close(s.results)
	if !s.deliver(s.framer.Feed(buffered)) {
		return
	}
	buf := make([]byte, size)
	for {
		n, err := s.rw.Read(buf)
		if n > 0 && !s.deliver(s.framer.Feed(buf[:n])) {
			return
		}
		if err != nil {
			s.framer.Reset() // disconnect: a partial frame is dropped
			s.fail(err)
			return
		}
	}
}

func (s *Stream) deliver(rs []Result) bool {
	for _, r := range rs {
		select {
		case s.results <- r:
		case <-s.stop:
			return false
		}
	}
	return true
}

func (s *Stream) writeLoop() {
	defer close(s.writeDone)
	s.out.run(s.stop, func(f []byte) error {
		_, err := s.rw.Write(f)
		return err
	}, s.fail)
}

// checkFrameShape refuses anything but one line: bytes then exactly one
// LF, at the end. (A Device Info line on a stream has the same shape.)
func checkFrameShape(frame []byte) error {
	n := len(frame)
	if n < 2 || frame[n-1] != '\n' || bytes.IndexByte(frame[:n-1], '\n') >= 0 {
		return errors.New("nexting: not one frame ending with its only LF")
	}
	if n > MaxDeviceInfoBytes+1 {
		return tooLarge(n, MaxDeviceInfoBytes+1)
	}
	return nil
}

// ---- Device Info on a stream ----

// The GATT design reads Device Info from its own characteristic. A byte
// stream has one channel, so this package binds it the simplest way that
// keeps frames untouched: on a stream transport the device first writes its
// Device Info value, compacted to one line (it contains no LF once compact:
// JSON escapes LF inside strings), followed by one LF; framed traffic
// follows. The host reads that line (at most MaxDeviceInfoBytes plus the
// LF) before anything else. This binding is the project's, not published.

// readInfoLine reads the Device Info line from r, in bounded chunks. It
// returns the line without its LF and any bytes read past it.
func readInfoLine(r io.Reader) (line, rest []byte, err error) {
	var buf []byte
	chunk := make([]byte, 512)
	for {
		n, rerr := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			if i > MaxDeviceInfoBytes {
				break
			}
			return buf[:i], buf[i+1:], nil
		}
		if len(buf) > MaxDeviceInfoBytes {
			break
		}
		if rerr != nil {
			if rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			return nil, nil, rerr
		}
	}
	return nil, nil, &Error{Code: CodeMessageTooLarge, Detail: "Device Info line exceeds 4096 bytes", Size: len(buf)}
}

func closeIfCloser(x any) {
	if c, ok := x.(io.Closer); ok {
		_ = c.Close()
	}
}
