package httpapi

import (
	"net/http"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/lane"
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

// eventFormat is how a response spells the events: NDJSON, the default,
// or the raw stream for a client whose Accept asks for it (api/rawstream.go;
// the output bytes go out as the lane decoded and checked them from the
// device's canonical base64, §4 Encoding).
type eventFormat struct {
	contentType string
	accepted    func(b []byte, id string) []byte
	chunk       func(b []byte, ch *protocol.Chunk) []byte
	outcome     func(b []byte, state protocol.InstructionState, o protocol.Outcome, laneCancelled bool) []byte
	device      func(b []byte, connected bool, grace time.Duration) []byte
}

var (
	ndjsonFormat = eventFormat{api.ContentTypeNDJSON, api.AppendAcceptedLine, api.AppendChunkLine, api.AppendOutcomeLine, api.AppendDeviceLine}
	rawFormat    = eventFormat{api.ContentTypeRawStream, api.AppendRawAccepted, api.AppendRawChunk, api.AppendRawOutcome, api.AppendRawDevice}
)

// formatFor is the format r's Accept asks for.
func formatFor(r *http.Request) eventFormat {
	if api.AcceptsRawStream(r.Header.Values("Accept")) {
		return rawFormat
	}
	return ndjsonFormat
}

// streamCall writes a call's events as NDJSON, or as the raw stream when
// asked. If the client goes away the call is cancelled: nobody would see
// its outcome.
func (s *API) streamCall(w http.ResponseWriter, r *http.Request, call *lane.Call) {
	f := formatFor(r)
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w}
	out.flusher, _ = w.(http.Flusher)
	if r.Header.Get(api.HeaderNotices) == api.NoticesDevice {
		call.FollowDevice()
	}
	out.buf = f.accepted(out.buf, call.ID)
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
			out.buf = f.outcome(out.buf, e.Settled.State, e.Settled.Outcome, e.Settled.LaneCancelled)
			out.write()
			probe.Mark(probe.LaneAnswered)
			return
		}
		if e.Device != nil {
			out.buf = f.device(out.buf, e.Device.Connected, e.Device.Grace)
			continue
		}
		out.buf = f.chunk(out.buf, e.Chunk)
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
