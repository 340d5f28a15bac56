package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sema-agent/sema/protocol"
)

// The NDJSON stream of an instruction (POST /v1/devices/{id}/instructions):
// one JSON object per line, "accepted" first, then chunks in stream order,
// then exactly one "outcome", last.
const (
	EventAccepted = "accepted"
	EventChunk    = "chunk"
	EventOutcome  = "outcome"
	// EventDevice, only to a caller that asked for it (HeaderNotices), says
	// that the device's connection dropped while the instruction was in
	// flight, or came back.
	EventDevice = "device"
)

// HeaderNotices, set to NoticesDevice on POST /v1/devices/{id}/instructions,
// asks for EventDevice lines in the stream; without it the stream holds
// accepted, chunks and the outcome only.
const (
	HeaderNotices = "Sema-Notices"
	NoticesDevice = "device"
)

// The presence an EventDevice line reports.
const (
	PresenceDisconnected = "disconnected"
	PresenceConnected    = "connected"
)

// ContentTypeNDJSON is the media type of an instruction's event stream.
const ContentTypeNDJSON = "application/x-ndjson"

// Event is one line of an instruction's stream.
type Event struct {
	Event         string // EventAccepted, EventChunk or EventOutcome
	InstructionID string // accepted
	// Chunk: Kind is stdout, stderr, data or exit; Data the decoded bytes
	// (valid until the next call of EventReader.Next); ExitCode for exit.
	Kind      protocol.ChunkKind
	StreamSeq int64
	Data      []byte
	ExitCode  *int
	// Outcome: State is terminal or terminal_never_started; Outcome the
	// outcome object as the lane sent it.
	State   protocol.InstructionState
	Outcome json.RawMessage
	// CancelledBy is "lane" when the lane cancelled the command on its own
	// (its output outran the pending-delivery bound, §4).
	CancelledBy string
	// Device: Presence is PresenceDisconnected or PresenceConnected;
	// GraceMs, when disconnected, how long the lane waits for the device
	// before it settles the instruction.
	Presence string
	GraceMs  int64
}

// MaxEventLine bounds one line of the stream: a chunk of the largest frame
// the protocol allows (1 MiB) is well under it once base64-encoded.
const MaxEventLine = 8 << 20

// EventReader reads an instruction's NDJSON stream.
type EventReader struct {
	br   *bufio.Reader
	data []byte // the decoded bytes of the last fast chunk, reused
	line []byte // the last line read
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, 1<<20)}
}

// ErrBadEvent wraps every malformed line.
var ErrBadEvent = errors.New("a bad line in the lane's stream")

type wireEvent struct {
	Event         string                    `json:"event"`
	InstructionID string                    `json:"instructionId"`
	Kind          protocol.ChunkKind        `json:"kind"`
	StreamSeq     int64                     `json:"streamSeq"`
	DataB64       *string                   `json:"dataB64"`
	ExitCode      *int                      `json:"exitCode"`
	State         protocol.InstructionState `json:"state"`
	Outcome       json.RawMessage           `json:"outcome"`
	CancelledBy   string                    `json:"cancelledBy"`
	Presence      string                    `json:"presence"`
	GraceMs       int64                     `json:"graceMs"`
}

// Next returns the next event; io.EOF at a clean end of the stream (which,
// before an outcome, the caller must treat as a broken stream).
//
// An output chunk spelled exactly as the lane writes it takes a fast path
// (fastchunk.go) that decodes its base64 into a buffer the reader reuses;
// every other line, and any chunk line the fast path does not take in
// full, is read by encoding/json, whose verdict stands.
func (r *EventReader) Next() (Event, error) {
	line, err := r.readLine()
	if err != nil {
		return Event{}, err
	}
	r.line = line
	if e, ok := r.fastChunk(line); ok {
		return e, nil
	}
	return slowEvent(line)
}

// Line is the line of the last event Next returned, as the lane sent it
// (with its newline); valid until the next call of Next.
func (r *EventReader) Line() []byte { return r.line }

// slowEvent reads any line with encoding/json.
func slowEvent(line []byte) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(line, &w); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	e := Event{Event: w.Event, InstructionID: w.InstructionID, Kind: w.Kind, StreamSeq: w.StreamSeq,
		ExitCode: w.ExitCode, State: w.State, Outcome: w.Outcome, CancelledBy: w.CancelledBy,
		Presence: w.Presence, GraceMs: w.GraceMs}
	if w.Event == EventChunk && w.DataB64 != nil {
		var err error
		if e.Data, err = protocol.DecodeCanonicalBase64(*w.DataB64); err != nil {
			return Event{}, fmt.Errorf("%w: chunk %d: %v", ErrBadEvent, w.StreamSeq, err)
		}
	}
	return e, nil
}

func (r *EventReader) readLine() ([]byte, error) {
	var long []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		if err == nil {
			if long != nil {
				return append(long, frag...), nil
			}
			return frag, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, frag...)
			if len(long) > MaxEventLine {
				return nil, fmt.Errorf("%w: a line over %d bytes", ErrBadEvent, MaxEventLine)
			}
			continue
		}
		if err == io.EOF && len(long)+len(frag) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
}
