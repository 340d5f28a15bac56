package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// The raw stream of an instruction: the same events as the NDJSON stream,
// for a client that asks for it with Accept (docs/api.md), with output as
// its bytes rather than base64 in JSON. Each event is one frame:
//
//	type (1 byte) | length of the body (4 bytes, big-endian) | body
//
// Type 'o', 'e' and 'd' are a stdout, stderr and data chunk: the body is
// its streamSeq (8 bytes, big-endian) and then the chunk's bytes. Type 'j'
// is any other event (accepted, an exit chunk, a device notice, the
// outcome): the body is
// the JSON object of its NDJSON line, without the newline, byte for byte.
// A body is at most MaxEventLine bytes.

// ContentTypeRawStream is the media type of the raw stream.
const ContentTypeRawStream = "application/vnd.sema.stream"

// The frame types of the raw stream.
const (
	rawStdout = 'o'
	rawStderr = 'e'
	rawData   = 'd'
	rawJSON   = 'j'
)

const (
	rawHeadLen = 5 // type and length
	rawSeqLen  = 8 // a chunk's streamSeq
	// maxSafeSeq is 2^53-1: §4 keeps streamSeq a safe integer.
	maxSafeSeq = protocol.MaxSafeInteger
)

var rawKinds = map[protocol.ChunkKind]byte{protocol.ChunkStdout: rawStdout, protocol.ChunkStderr: rawStderr, protocol.ChunkData: rawData}

// AcceptsRawStream reports whether an Accept header's values name the raw
// stream with a quality above zero.
func AcceptsRawStream(accept []string) bool {
	for _, v := range accept {
		for _, r := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
			if err != nil || mt != ContentTypeRawStream {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err != nil || f <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// AppendRawAccepted appends the accepted event of instruction id.
func AppendRawAccepted(b []byte, id string) []byte {
	return appendRawJSON(b, AppendAcceptedLine(nil, id))
}

// AppendRawOutcome appends the outcome event, as AppendOutcomeLine.
func AppendRawOutcome(b []byte, state protocol.InstructionState, o protocol.Outcome, laneCancelled bool) []byte {
	return appendRawJSON(b, AppendOutcomeLine(nil, state, o, laneCancelled))
}

// AppendRawDevice appends a device notice, as AppendDeviceLine.
func AppendRawDevice(b []byte, connected bool, grace time.Duration) []byte {
	return appendRawJSON(b, AppendDeviceLine(nil, connected, grace))
}

// AppendRawChunk appends one chunk: its bytes for output, its JSON line
// for any other kind.
func AppendRawChunk(b []byte, ch *protocol.Chunk) []byte {
	t, ok := rawKinds[ch.Kind]
	if !ok {
		return appendRawJSON(b, AppendChunkLine(nil, ch))
	}
	b = appendRawHead(b, t, rawSeqLen+len(ch.Data))
	b = binary.BigEndian.AppendUint64(b, uint64(ch.StreamSeq))
	return append(b, ch.Data...)
}

// appendRawJSON frames an NDJSON line (its newline left out).
func appendRawJSON(b, line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return append(appendRawHead(b, rawJSON, len(line)), line...)
}

func appendRawHead(b []byte, t byte, n int) []byte {
	return binary.BigEndian.AppendUint32(append(b, t), uint32(n))
}

// RawEventReader reads an instruction's raw stream.
type RawEventReader struct {
	r    io.Reader
	head [rawHeadLen]byte
	body []byte // the last frame's body, reused
	last Event
	json bool   // the last frame was a JSON event
	line []byte // Line's, made on demand
}

// NewRawEventReader reads events from a raw stream.
func NewRawEventReader(r io.Reader) *RawEventReader {
	return &RawEventReader{r: bufio.NewReaderSize(r, 64<<10)} // a frame's head is read 5 bytes at a time
}

// Next returns the next event, as EventReader.Next: io.EOF at a clean end
// (between frames), io.ErrUnexpectedEOF inside one, ErrBadEvent for a
// frame that breaks the format. Data is valid until the next call.
func (r *RawEventReader) Next() (Event, error) {
	r.line = r.line[:0]
	if _, err := io.ReadFull(r.r, r.head[:]); err != nil {
		return Event{}, err // io.EOF only when no byte of a frame came
	}
	t, n := r.head[0], binary.BigEndian.Uint32(r.head[1:])
	if n > MaxEventLine {
		return Event{}, fmt.Errorf("%w: a frame of %d bytes, over %d", ErrBadEvent, n, MaxEventLine)
	}
	var kind protocol.ChunkKind
	switch t {
	case rawStdout:
		kind = protocol.ChunkStdout
	case rawStderr:
		kind = protocol.ChunkStderr
	case rawData:
		kind = protocol.ChunkData
	case rawJSON:
	default:
		return Event{}, fmt.Errorf("%w: an unknown frame type 0x%02x", ErrBadEvent, t)
	}
	if kind != "" && n < rawSeqLen {
		return Event{}, fmt.Errorf("%w: a %s frame of %d bytes, shorter than its streamSeq", ErrBadEvent, kind, n)
	}
	if cap(r.body) < int(n) {
		r.body = make([]byte, n)
	}
	r.body = r.body[:n]
	if _, err := io.ReadFull(r.r, r.body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Event{}, err
	}
	r.json = kind == ""
	if r.json {
		if bytes.IndexByte(r.body, '\n') >= 0 {
			return Event{}, fmt.Errorf("%w: a JSON event over more than one line", ErrBadEvent)
		}
		e, err := slowEvent(r.body)
		r.last = e
		return e, err
	}
	seq := binary.BigEndian.Uint64(r.body)
	if seq > maxSafeSeq {
		return Event{}, fmt.Errorf("%w: streamSeq %d past 2^53-1", ErrBadEvent, seq)
	}
	r.last = Event{Event: EventChunk, Kind: kind, StreamSeq: int64(seq), Data: r.body[rawSeqLen:]}
	return r.last, nil
}

// Line is the last event as its NDJSON line, byte for byte what the lane
// writes in that stream (with its newline); valid until the next Next.
func (r *RawEventReader) Line() []byte {
	if len(r.line) > 0 {
		return r.line
	}
	if r.json {
		r.line = append(append(r.line, r.body...), '\n')
	} else {
		r.line = AppendChunkLine(r.line, &protocol.Chunk{Kind: r.last.Kind, StreamSeq: r.last.StreamSeq, Data: r.last.Data})
	}
	return r.line
}

// EventStream is a reader of either stream.
type EventStream interface {
	Next() (Event, error)
	Line() []byte
}

// NewEventStream reads r by its Content-Type: the raw stream when it
// names ContentTypeRawStream, else NDJSON.
func NewEventStream(contentType string, r io.Reader) EventStream {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == ContentTypeRawStream {
		return NewRawEventReader(r)
	}
	return NewEventReader(r)
}
