package api

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// The writer of an instruction's NDJSON stream, the other side of
// EventReader: the lane's HTTP API writes every line with these.

// AppendAcceptedLine appends the "accepted" line of instruction id.
func AppendAcceptedLine(b []byte, id string) []byte {
	return appendJSONLine(b, map[string]string{"event": EventAccepted, "instructionId": id})
}

// AppendOutcomeLine appends the "outcome" line, last of a stream;
// laneCancelled marks the lane's own cancel (cancelledBy "lane").
func AppendOutcomeLine(b []byte, state protocol.InstructionState, o protocol.Outcome, laneCancelled bool) []byte {
	outcome, _ := o.(interface{ MarshalJSON() ([]byte, error) }).MarshalJSON()
	line := map[string]any{"event": EventOutcome, "state": state, "outcome": json.RawMessage(outcome)}
	if laneCancelled {
		line["cancelledBy"] = "lane" // docs/api.md: the lane's own cancel, never the caller's
	}
	return appendJSONLine(b, line)
}

// AppendDeviceLine appends a "device" line: the device's connection
// dropped (and the lane waits grace for it) or came back.
func AppendDeviceLine(b []byte, connected bool, grace time.Duration) []byte {
	if connected {
		return appendJSONLine(b, map[string]string{"event": EventDevice, "presence": PresenceConnected})
	}
	return appendJSONLine(b, map[string]any{"event": EventDevice, "presence": PresenceDisconnected, "graceMs": grace.Milliseconds()})
}

// AppendChunkLine appends one chunk's line. The four kinds §4 allows are
// written by hand: a kind, a decimal and base64 need no JSON escape.
func AppendChunkLine(b []byte, ch *protocol.Chunk) []byte {
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
	return appendJSONLine(b, chunkEvent{Event: EventChunk, Kind: ch.Kind, StreamSeq: ch.StreamSeq, DataB64: &data})
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
