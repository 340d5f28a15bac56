package lane

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/protocol"
)

// Instruction is one unit of work to run on a device.
type Instruction struct {
	Kind     protocol.InstructionKind
	Args     protocol.Args // the Args type of Kind (protocol.ArgsFits)
	Cwd      string        // "" for the implied working directory
	ShellEnv map[string]string
	// Timeout is timeoutMs: the device's own limit. Required (> 0).
	Timeout time.Duration
	// Content is the bytes of a write-family instruction; the lane computes
	// contentLen and sha256 and sends it as payload parts (§3.4).
	Content []byte
	// ContentStream, instead of Content, streams a write's bytes: the lane
	// reads exactly ContentLen bytes from it, PayloadPartBytes at a time, as
	// it sends them, holding no more than one part. ContentLen and
	// ContentSHA256 are the contentLen and sha256 it declares (§3.4); the
	// device verifies both at the commit, so a stream that ends short or
	// does not match its digest fails the instruction with no file. The
	// stream is read only once the call is committed, from the lane's send
	// goroutine, and never after Call.ContentReleased is closed; a call that
	// is never sent does not read it at all.
	ContentStream io.Reader
	ContentLen    int64
	ContentSHA256 protocol.Digest
	// RootSessionID names the caller's root session; informational.
	RootSessionID string
	// EnvironmentSupports, when not nil, is the device's supports list as it
	// was when the caller's task environment was built (§3.2): an ordinary
	// write is refused if the device has since gained a protective face.
	EnvironmentSupports []protocol.InstructionKind
}

// Settlement is how an instruction ended: terminal (the device's answer,
// a cancel receipt, or a backstop's outcome_unknown) or
// terminal_never_started (it never reached the device; safe to retry).
type Settlement struct {
	State   protocol.InstructionState
	Outcome protocol.Outcome
	// LaneCancelled: the lane itself cancelled the command because its
	// output outran the pending-delivery bound (§4); Outcome is then the
	// lane's failure that says so (aborted, or outcome_unknown), never the
	// device's answer as it stood, since output was dropped.
	LaneCancelled bool
}

// Event is one thing a Call yields: a chunk, in stream order, or the
// settlement, exactly once and last; and, to a caller that asked for them
// (FollowDevice), a notice when the device's connection drops or comes
// back while the call is in flight.
type Event struct {
	Chunk   *protocol.Chunk
	Settled *Settlement
	Device  *DeviceNotice
}

// DeviceNotice says that the device's connection dropped while the call
// was in flight, and how long the lane waits for it to come back before it
// settles the call (R4's reconnect grace), or that it came back.
type DeviceNotice struct {
	Connected bool
	Grace     time.Duration // while disconnected: the wait, from now
}

// ErrDeliveryOverflow: the caller read the Call's events too slowly and the
// pending-delivery bound (§4) overflowed; the remote command was cancelled.
var ErrDeliveryOverflow = errors.New("lane: the caller did not keep up with the output; the instruction was cancelled")

// Call is one dispatched instruction. Its events are read with Next; its
// settlement with Wait.
//
// Reading paces the device: the lane acknowledges output (chunkAck) only
// while at most half the pending-delivery bound (Config.DeliveryEntries,
// DeliveryBytes) waits unread, and again once Next has taken enough. The
// executor holds back output it has not had acknowledged, so a slow reader
// slows the command (its pipe fills and it blocks, as under ssh) instead of
// losing output; backlog.go gives the argument that our executor can never
// overflow the bound. A caller that does not read stalls the command until
// its timeout; one that must not, drains Next. The bound itself still holds
// against a device that runs ahead of its acknowledgements: an overflow
// cancels the remote command (§4), the settlement is the lane's aborted
// failure naming the bound (Settlement.LaneCancelled), and Err reports
// ErrDeliveryOverflow.
type Call struct {
	ID       string
	DeviceID string
	Kind     protocol.InstructionKind

	srv   *Server
	owner string // the identity that dispatched it ("" for Go callers)
	from  Requester

	// For the history row, under the device's lock: when the call was
	// committed (zero if never) and the bytes of output delivered, by
	// stream (historyStdout, historyStderr, historyData).
	dispatchedAt time.Time
	outBytes     [3]int64

	// The consumer side, under mu.
	mu         sync.Mutex
	events     []Event
	backlog    backlog
	overflowed bool
	notify     chan struct{}
	done       chan struct{}
	settlement Settlement
	finished   bool // the settlement event was taken by Next
	following  bool // FollowDevice was called: notices are queued too

	// The lane side, under the device's lock.
	state       protocol.InstructionState
	frame       protocol.Instruction
	content     []byte // until dropContent
	contentDone func() // once the lane has let go of content (dispatch)
	stream      *stream
	resultSeq   int64 // highest deviceSeq seen; -1 for none
	ackedTo     int64 // the chunkAck watermark sent; -1 for none
	droppedFrom int64 // the first streamSeq the delivery bound dropped; -1 for none
	ceiling     clock.Timer
	gapTimer    clock.Timer
	cancelTimer clock.Timer
	cancelWant  bool // a cancel was requested
	cancelGen   protocol.Gen

	// A streamed content (Instruction.ContentStream), until dropContent;
	// released is closed by contentDone. contentShort, set by the send
	// goroutine, says how the stream ended early; the settlement's failure
	// message starts with it.
	upload       io.Reader
	released     chan struct{}
	contentShort string
}

// Next returns the next event: chunks in order, then the settlement. After
// the settlement it returns io.EOF.
func (c *Call) Next(ctx context.Context) (Event, error) {
	for {
		c.mu.Lock()
		if len(c.events) > 0 {
			e := c.events[0]
			c.events[0] = Event{}
			c.events = c.events[1:]
			var upTo int64
			var release bool
			if e.Chunk != nil {
				upTo, release = c.backlog.take(len(e.Chunk.Data))
			}
			if e.Settled != nil {
				c.finished = true
			}
			c.mu.Unlock()
			if release {
				c.srv.releaseAck(c, upTo)
			}
			return e, nil
		}
		if c.finished {
			c.mu.Unlock()
			return Event{}, io.EOF
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Ready reports whether Next would return at once, without waiting: an
// event is queued, or the settlement was taken (io.EOF).
func (c *Call) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events) > 0 || c.finished
}

// Wait returns the settlement once the instruction has settled.
func (c *Call) Wait(ctx context.Context) (Settlement, error) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.settlement, nil
	case <-ctx.Done():
		return Settlement{}, ctx.Err()
	}
}

// Done is closed when the instruction has settled.
func (c *Call) Done() <-chan struct{} { return c.done }

// Err reports ErrDeliveryOverflow if the pending-delivery bound overflowed.
func (c *Call) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overflowed {
		return ErrDeliveryOverflow
	}
	return nil
}

// Cancel asks for the instruction to stop (R11). It is idempotent. A queued
// instruction settles terminal_never_started at once; a committed one is
// sent a cancel and settles on the device's answer or after the cancel
// grace.
func (c *Call) Cancel() { c.srv.cancel(c) }

// push queues a chunk for the consumer; false if the delivery bound
// overflowed (the chunk is dropped and the caller must cancel).
func (c *Call) push(ch protocol.Chunk) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overflowed {
		return true // already being cancelled; further output is dropped
	}
	if !c.backlog.push(ch.StreamSeq, len(ch.Data)) {
		c.overflowed = true
		return false
	}
	c.events = append(c.events, Event{Chunk: &ch})
	c.wake()
	return true
}

// ackNow decides, after chunks were pushed, whether the lane acknowledges
// them now and up to which streamSeq (see backlog); if not, the Next that
// brings the backlog inside the window does (releaseAck).
func (c *Call) ackNow() (upTo int64, ack bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backlog.afterPush()
}

// FollowDevice makes Next yield a DeviceNotice when the device's
// connection drops or comes back while the call is in flight. Without it
// Next yields chunks and the settlement only.
func (c *Call) FollowDevice() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.following = true
}

// notice queues n for a caller following the device; once settled, no
// more.
func (c *Call) notice(n DeviceNotice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.following {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	c.events = append(c.events, Event{Device: &n})
	c.wake()
}

// finish records the settlement, once.
func (c *Call) finish(s Settlement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	c.settlement = s
	c.events = append(c.events, Event{Settled: &s})
	close(c.done)
	c.wake()
}

// dropContent lets go of a write's content: its payload has been written
// to the device (or failed to be), or it will never be sent. Called by the
// one party that owns the content at that point: the send goroutine of a
// committed call, settle for one that never was.
func (c *Call) dropContent() {
	c.content, c.upload = nil, nil
	c.contentDone()
}

// ContentReleased is closed once the lane has let go of the instruction's
// content: after it, the lane reads no more of a ContentStream.
func (c *Call) ContentReleased() <-chan struct{} { return c.released }

func (c *Call) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}
