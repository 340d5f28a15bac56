package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// Sink takes what an instruction's stream carries, as it comes. Every
// field may be nil.
type Sink struct {
	// Accepted: the lane took the instruction under this id.
	Accepted func(instructionID string)
	// Chunk: a stdout, stderr or data chunk, in stream order; data is
	// valid during the call only. An error stops following the stream,
	// which cancels the instruction (its fate is then unknown).
	Chunk func(kind protocol.ChunkKind, data []byte) error
	// Line: each event as its NDJSON line, with its newline, byte for byte
	// what the lane writes in that stream (whichever stream it sent),
	// before the event is handled; valid during the call only.
	Line func(line []byte)
	// Cancelling: ctx ended, so the cancel is being posted and the outcome
	// awaited (at most CancelWait). Called at most once, from another
	// goroutine than Accepted and Chunk.
	Cancelling func()
	// Device: the device's connection dropped while the instruction was in
	// flight and the lane waits up to grace for it to come back, or it came
	// back (connected). When set, Instruct asks the lane for these notices.
	Device func(connected bool, grace time.Duration)
}

// Result is how an instruction ended.
type Result struct {
	ID      string
	State   protocol.InstructionState // terminal or terminal_never_started
	Outcome api.Outcome
	// Interrupted: ctx ended during the call and a cancel was sent.
	Interrupted bool
	// LaneCancelled: the lane cancelled the command on its own (the
	// outcome line's cancelledBy "lane": its output outran the lane's
	// pending-delivery bound, §4); the output is incomplete.
	LaneCancelled bool
}

// NeverStarted reports an outcome that proves the work never started: it
// is safe to retry.
func (r Result) NeverStarted() bool {
	if r.State == protocol.StateTerminalNeverStarted {
		return true
	}
	switch r.Outcome.ErrorCode {
	case protocol.ErrTargetUnavailable, protocol.ErrShellUnavailable, protocol.ErrSpawnError, protocol.ErrNotSupported:
		return true
	}
	return false
}

// StreamError is a stream that broke after the lane took the request (a
// bad line, a connection lost, a Sink.Chunk error): the instruction may
// have run, and its outcome is not known.
type StreamError struct {
	InstructionID string // "" when the stream broke before its accepted event
	Err           error
}

func (e *StreamError) Error() string {
	id := "the instruction"
	if e.InstructionID != "" {
		id = "instruction " + e.InstructionID
	}
	return fmt.Sprintf("%v; %s may have run", e.Err, id)
}

func (e *StreamError) Unwrap() error { return e.Err }

// ErrNotSent wraps ctx's error when ctx ended before anything was sent.
var ErrNotSent = errors.New("cancelled before it was sent")

// CancelWait bounds the wait for an outcome after a cancel: the lane
// settles a cancelled instruction within its cancel grace (10 s by
// default), so this is generous.
const CancelWait = 30 * time.Second

// DefaultCommandTimeout is the device's limit for a command whose caller
// names none: the CLI's run and the MCP face's run_command. It fits real
// work (a build, a test suite); a caller that wants less says so.
const DefaultCommandTimeout = 10 * time.Minute

// cancelPostTimeout bounds the cancel request itself.
const cancelPostTimeout = 10 * time.Second

// Instruct posts an instruction (POST /v1/devices/{id}/instructions) and
// follows its stream to the outcome, handing events to sink as they come.
//
// When ctx ends first (Ctrl-C), the stream is not dropped: Instruct posts
// the cancel and keeps reading until the lane settles the instruction, at
// most CancelWait, so that the result says what the device did
// (Result.Interrupted is set). Errors: ErrNotSent (wrapping ctx's error),
// *Error (the lane refused it: nothing was queued), *UnreachableError
// (nothing was sent, or no answer came), *StreamError (the outcome is not
// known), *NotUTF8Error (nothing was sent).
func (c *Client) Instruct(ctx context.Context, deviceID string, in api.InstructionRequest, sink Sink) (Result, error) {
	if err := checkUTF8(in); err != nil {
		return Result{}, err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return Result{}, err
	}
	build := func(ctx context.Context) (*http.Request, error) {
		req, err := c.newRequest(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/instructions", bytesReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			if sink.Device != nil {
				req.Header.Set(api.HeaderNotices, api.NoticesDevice)
			}
		}
		return req, err
	}
	return c.stream(ctx, build, nil, sink)
}

// stream sends the request build makes and follows its event stream. The
// request lives on a context of its own: it outlives ctx, whose end posts
// the cancel (see watch). body, when not nil, is the upload's body.
func (c *Client) stream(ctx context.Context, build func(context.Context) (*http.Request, error), body *gatedBody, sink Sink) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	streamCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	req, err := build(streamCtx)
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Accept", streamAccept)
	w := newWatcher(c, ctx, abort, body, sink.Cancelling)
	defer w.stop()
	// stoppedShort: ctx ended before the body was all sent. The body's own
	// reader may fail first (it saw ctx end too) before the watcher has
	// stopped the body: the cause is still ctx.
	stoppedShort := func() bool {
		return w.stoppedShort() || (body != nil && ctx.Err() != nil && !body.stop())
	}
	resp, err := c.do(req)
	if err != nil {
		if stoppedShort() {
			return Result{}, fmt.Errorf("%w (%w)", ErrUploadStopped, ctx.Err())
		}
		return Result{}, err
	}
	defer resp.Body.Close()
	res, err := follow(api.NewEventStream(resp.Header.Get("Content-Type"), resp.Body), sink, w)
	if err != nil && stoppedShort() {
		return res, fmt.Errorf("%w (%w)", ErrUploadStopped, ctx.Err())
	}
	return res, err
}

// streamAccept asks for the raw stream (output as its bytes, not base64
// in JSON) and takes NDJSON from a lane that has no raw stream: the
// answer's Content-Type says which came.
const streamAccept = api.ContentTypeRawStream + ", " + api.ContentTypeNDJSON + ";q=0.5"

// follow reads the event stream to its outcome. Leaving early closes the
// stream, which cancels the instruction.
func follow(er api.EventStream, sink Sink, w *watcher) (Result, error) {
	var res Result
	accepted := false
	broken := func(format string, args ...any) error {
		return &StreamError{InstructionID: res.ID, Err: fmt.Errorf(format, args...)}
	}
	for {
		ev, err := er.Next()
		switch {
		case errors.Is(err, api.ErrBadEvent):
			return res, broken("%v", err)
		case err == io.EOF:
			return res, broken("the lane's stream ended before the outcome (%v)", io.ErrUnexpectedEOF)
		case err != nil:
			return res, broken("the lane's stream ended before the outcome (%v)", err)
		}
		if sink.Line != nil {
			sink.Line(er.Line())
		}
		if !accepted && ev.Event != api.EventAccepted {
			return res, broken("the lane's stream did not begin with its accepted event")
		}
		switch ev.Event {
		case api.EventAccepted:
			switch {
			case accepted:
				return res, broken("a second accepted event in the lane's stream")
			case ev.InstructionID == "":
				return res, broken("an accepted event without an instructionId in the lane's stream")
			}
			accepted = true
			res.ID = ev.InstructionID
			w.accepted(res.ID)
			if sink.Accepted != nil {
				sink.Accepted(res.ID)
			}
		case api.EventChunk:
			if ev.Kind == protocol.ChunkExit || len(ev.Data) == 0 || sink.Chunk == nil {
				continue // the exit code comes again in the outcome
			}
			if err := sink.Chunk(ev.Kind, ev.Data); err != nil {
				return res, &StreamError{InstructionID: res.ID, Err: err} // errors.Is finds the sink's error
			}
		case api.EventDevice:
			if sink.Device == nil {
				return res, broken("a device notice the client did not ask for in the lane's stream")
			}
			switch ev.Presence {
			case api.PresenceConnected:
				sink.Device(true, 0)
			case api.PresenceDisconnected:
				sink.Device(false, time.Duration(ev.GraceMs)*time.Millisecond)
			default:
				return res, broken("a device notice with an unknown presence %q in the lane's stream", ev.Presence)
			}
		case api.EventOutcome:
			res.State, res.LaneCancelled = ev.State, ev.CancelledBy == "lane"
			if err := json.Unmarshal(ev.Outcome, &res.Outcome); err != nil {
				return res, broken("a bad outcome in the lane's stream: %v", err)
			}
			res.Interrupted = w.interrupted()
			return res, nil
		default:
			return res, broken("an unknown event %q in the lane's stream", ev.Event)
		}
	}
}
