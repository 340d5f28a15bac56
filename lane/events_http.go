package lane

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/protocol"
)

// This file writes an instruction's events as the NDJSON stream of
// docs/api.md: {"event":"accepted",…}, the chunks in stream order, then
// {"event":"outcome",…}. Output chunks are nearly all of it, so their lines
// are written by hand — byte for byte what encoding/json made of them
// before (events_http_test.go holds the two together) — with the device's
// own canonical base64 copied in (protocol.Chunk.DataB64: §4 Encoding
// allows one spelling of the data, so it is the encoding, verified, and is
// neither decoded nor encoded again here). Lines are gathered in a buffer
// and flushed when no further event is ready, so a reader sees every event
// as soon as the lane has it, and a fast stream goes out in large writes.

// eventWriteBytes is how much a fast stream gathers before it is written
// even though more events are ready.
const eventWriteBytes = 512 << 10

// streamCall writes a call's events as NDJSON. If the client goes away the
// call is cancelled: nobody would see its outcome.
func (s *Server) streamCall(w http.ResponseWriter, r *http.Request, call *Call) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w}
	out.flusher, _ = w.(http.Flusher)
	out.buf = appendAcceptedLine(out.buf, call.ID)
	for {
		if !call.Ready() && !out.flush() {
			call.Cancel()
			return
		}
		e, err := call.Next(r.Context())
		if err != nil {
			call.Cancel()
			return
		}
		if e.Settled != nil {
			// Written, not flushed: net/http flushes it with the chunked
			// body's terminator when the handler returns, in one write, so
			// the caller sees the outcome and the end of the body at once.
			out.buf = appendOutcomeLine(out.buf, e.Settled)
			out.write()
			probe.Mark(probe.LaneAnswered)
			return
		}
		out.buf = appendChunkLine(out.buf, e.Chunk)
		e.Chunk.Release() // this stream was its one holder; its memory goes back to the decoder's pool
		if len(out.buf) >= eventWriteBytes && !out.write() {
			call.Cancel()
			return
		}
	}
}

// eventWriter gathers lines for one response.
type eventWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	buf     []byte
}

// write hands the gathered lines to the response; false if the client is
// gone.
func (o *eventWriter) write() bool {
	if len(o.buf) == 0 {
		return true
	}
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	return err == nil
}

// flush writes and sends what the response holds to the client.
func (o *eventWriter) flush() bool {
	if !o.write() {
		return false
	}
	if o.flusher != nil {
		o.flusher.Flush()
	}
	return true
}

func appendAcceptedLine(b []byte, id string) []byte {
	return appendJSONLine(b, map[string]string{"event": "accepted", "instructionId": id})
}

func appendOutcomeLine(b []byte, s *Settlement) []byte {
	outcome, _ := s.Outcome.(interface{ MarshalJSON() ([]byte, error) }).MarshalJSON()
	line := map[string]any{"event": "outcome", "state": s.State, "outcome": json.RawMessage(outcome)}
	if s.LaneCancelled {
		line["cancelledBy"] = "lane" // docs/api.md: the lane's own cancel, never the caller's
	}
	return appendJSONLine(b, line)
}

// appendChunkLine appends one chunk's line. The four kinds §4 allows are
// written by hand: a kind, a decimal and base64 need no JSON escape.
func appendChunkLine(b []byte, ch *protocol.Chunk) []byte {
	switch ch.Kind {
	case protocol.ChunkStdout, protocol.ChunkStderr, protocol.ChunkData:
		b = appendChunkHead(b, ch)
		b = append(b, `,"dataB64":"`...)
		if ch.DataB64 != nil {
			b = append(b, ch.DataB64...)
		} else { // a chunk the lane did not decode from a frame
			b = b64.AppendEncode(b, ch.Data)
		}
		return append(b, "\"}\n"...)
	case protocol.ChunkExit:
		b = appendChunkHead(b, ch)
		b = append(b, `,"exitCode":`...)
		b = strconv.AppendInt(b, int64(ch.ExitCode), 10)
		return append(b, "}\n"...)
	}
	data := b64.EncodeToString(ch.Data) // no other kind comes from a device
	return appendJSONLine(b, chunkEvent{Event: "chunk", Kind: ch.Kind, StreamSeq: ch.StreamSeq, DataB64: &data})
}

func appendChunkHead(b []byte, ch *protocol.Chunk) []byte {
	b = append(b, `{"event":"chunk","kind":"`...)
	b = append(b, ch.Kind...)
	b = append(b, `","streamSeq":`...)
	return strconv.AppendInt(b, ch.StreamSeq, 10)
}

// chunkEvent is a chunk line as encoding/json spells it.
type chunkEvent struct {
	Event     string             `json:"event"`
	Kind      protocol.ChunkKind `json:"kind"`
	StreamSeq int64              `json:"streamSeq"`
	DataB64   *string            `json:"dataB64,omitempty"`
	ExitCode  *int               `json:"exitCode,omitempty"`
}

// appendJSONLine appends v as one line of JSON; the lane's own values
// always encode.
func appendJSONLine(b []byte, v any) []byte {
	line, _ := json.Marshal(v)
	return append(append(b, line...), '\n')
}
