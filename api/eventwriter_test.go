package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// The lines as encoding/json writes them: the reference the hand-written
// lines must equal.
func oldChunkLine(ch *protocol.Chunk) []byte {
	ev := chunkEvent{Event: "chunk", Kind: ch.Kind, StreamSeq: ch.StreamSeq}
	if ch.Kind == protocol.ChunkExit {
		ev.ExitCode = &ch.ExitCode
	} else {
		data := b64.EncodeToString(ch.Data)
		ev.DataB64 = &data
	}
	b, _ := json.Marshal(ev)
	return append(b, '\n')
}

func oldOutcomeLine(state protocol.InstructionState, o protocol.Outcome) []byte {
	outcome, _ := o.(interface{ MarshalJSON() ([]byte, error) }).MarshalJSON()
	b, _ := json.Marshal(map[string]any{"event": "outcome", "state": state, "outcome": json.RawMessage(outcome)})
	return append(b, '\n')
}

func oldAcceptedLine(id string) []byte {
	b, _ := json.Marshal(map[string]string{"event": "accepted", "instructionId": id})
	return append(b, '\n')
}

// Every kind of line is byte for byte what encoding/json wrote, whether the
// chunk came with the device's base64 or not.
func TestEventLinesAreWhatEncodingJSONWrote(t *testing.T) {
	binary := make([]byte, 70000)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	chunks := []protocol.Chunk{
		{Kind: protocol.ChunkStdout, StreamSeq: 0, Data: []byte("hi\n")},
		{Kind: protocol.ChunkStdout, StreamSeq: 1, Data: []byte{}},
		{Kind: protocol.ChunkStdout, StreamSeq: 1, Data: nil},
		{Kind: protocol.ChunkStderr, StreamSeq: 2, Data: []byte("<&>\u2028\"\\")},
		{Kind: protocol.ChunkData, StreamSeq: protocol.MaxSafeInteger, Data: binary},
		{Kind: protocol.ChunkData, StreamSeq: 3, Data: []byte{0xff, 0xfe}},
		{Kind: protocol.ChunkExit, StreamSeq: 4, ExitCode: 0},
		{Kind: protocol.ChunkExit, StreamSeq: 5, ExitCode: -1},
		{Kind: protocol.ChunkExit, StreamSeq: 6, ExitCode: 137},
		{Kind: protocol.ChunkExit, StreamSeq: 7, ExitCode: protocol.MaxSafeInteger},
		{Kind: "stdin", StreamSeq: 8, Data: []byte("never from a device")},
		{Kind: "\"<odd>\"", StreamSeq: 9},
	}
	for _, ch := range chunks {
		want := oldChunkLine(&ch)
		if got := AppendChunkLine(nil, &ch); !bytes.Equal(got, want) {
			t.Errorf("%s chunk without DataB64:\n got %s\nwant %s", ch.Kind, got, want)
		}
		if ch.Kind == protocol.ChunkExit {
			continue
		}
		ch.DataB64 = []byte(base64.StdEncoding.EncodeToString(ch.Data))
		if got := AppendChunkLine([]byte("before"), &ch); !bytes.Equal(got, append([]byte("before"), want...)) {
			t.Errorf("%s chunk with DataB64:\n got %s\nwant %s", ch.Kind, got, want)
		}
	}
	for _, id := range []string{"ins_01J8ZQ4T9X7M3K5N6P8R0S2V4W", "<&>"} {
		if got, want := AppendAcceptedLine(nil, id), oldAcceptedLine(id); !bytes.Equal(got, want) {
			t.Errorf("accepted: got %s want %s", got, want)
		}
	}
	for _, s := range []struct {
		State   protocol.InstructionState
		Outcome protocol.Outcome
	}{
		{State: protocol.StateTerminal, Outcome: protocol.ExecOutcome{ExitCode: 3}},
		{State: protocol.StateTerminalNeverStarted, Outcome: protocol.Failure{ErrorCode: protocol.ErrTargetUnavailable, Message: "<gone> & away"}},
	} {
		if got, want := AppendOutcomeLine(nil, s.State, s.Outcome, false), oldOutcomeLine(s.State, s.Outcome); !bytes.Equal(got, want) {
			t.Errorf("outcome: got %s want %s", got, want)
		}
	}
}

// The device notices read back as what was written, from the NDJSON
// stream and from the raw one: the presence, and the grace in whole
// milliseconds while disconnected.
func TestDeviceNoticesReadBack(t *testing.T) {
	for _, f := range []struct {
		contentType string
		append      func([]byte, bool, time.Duration) []byte
	}{{ContentTypeNDJSON, AppendDeviceLine}, {ContentTypeRawStream, AppendRawDevice}} {
		var b []byte
		b = f.append(b, false, 90*time.Second)
		b = f.append(b, true, 0)
		r := NewEventStream(f.contentType, bytes.NewReader(b))
		for _, want := range []Event{
			{Event: EventDevice, Presence: PresenceDisconnected, GraceMs: 90000},
			{Event: EventDevice, Presence: PresenceConnected},
		} {
			got, err := r.Next()
			if err != nil || got.Event != want.Event || got.Presence != want.Presence || got.GraceMs != want.GraceMs {
				t.Fatalf("%s: read %+v, %v; want %+v", f.contentType, got, err, want)
			}
		}
	}
}
