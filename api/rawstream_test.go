package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// A stream of every kind of event, written as NDJSON and as the raw stream.
func bothStreams(t testing.TB, chunks []protocol.Chunk, outcome protocol.Outcome, laneCancelled bool) (ndjson, raw []byte) {
	ndjson = AppendAcceptedLine(ndjson, "ins_1")
	raw = AppendRawAccepted(raw, "ins_1")
	for i := range chunks {
		ndjson = AppendChunkLine(ndjson, &chunks[i])
		raw = AppendRawChunk(raw, &chunks[i])
	}
	ndjson = AppendOutcomeLine(ndjson, protocol.StateTerminal, outcome, laneCancelled)
	raw = AppendRawOutcome(raw, protocol.StateTerminal, outcome, laneCancelled)
	return ndjson, raw
}

// readAll reads every event and its line, copying what Next lends.
func readStream(t testing.TB, s EventStream) (evs []Event, lines [][]byte, err error) {
	for {
		e, err := s.Next()
		if err != nil {
			return evs, lines, err
		}
		e.Data = bytes.Clone(e.Data)
		evs = append(evs, e)
		lines = append(lines, bytes.Clone(s.Line()))
	}
}

// The raw stream carries the same events as the NDJSON stream, and its
// reader gives back each event's NDJSON line byte for byte.
func TestRawStreamCarriesTheSameEventsAsNDJSON(t *testing.T) {
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 13)
	}
	chunks := []protocol.Chunk{
		{Kind: protocol.ChunkStdout, StreamSeq: 0, Data: []byte("hi\n")},
		{Kind: protocol.ChunkStdout, StreamSeq: 1, Data: []byte{}},
		{Kind: protocol.ChunkStderr, StreamSeq: 2, Data: []byte("<&>\u2028\"\\\n")},
		{Kind: protocol.ChunkData, StreamSeq: 3, Data: big},
		{Kind: protocol.ChunkData, StreamSeq: protocol.MaxSafeInteger, Data: []byte{0}},
		{Kind: protocol.ChunkExit, StreamSeq: 5, ExitCode: 137},
		{Kind: "stdin", StreamSeq: 6, Data: []byte("never from a device")},
	}
	outcome := protocol.Failure{ErrorCode: protocol.ErrAborted, Message: "cut\nshort"}
	for _, cancelled := range []bool{false, true} {
		ndjson, raw := bothStreams(t, chunks, outcome, cancelled)
		want, wantLines, err := readStream(t, NewEventStream(ContentTypeNDJSON, bytes.NewReader(ndjson)))
		if err != io.EOF {
			t.Fatalf("ndjson: %v", err)
		}
		got, gotLines, err := readStream(t, NewEventStream(ContentTypeRawStream, bytes.NewReader(raw)))
		if err != io.EOF {
			t.Fatalf("raw: %v", err)
		}
		for i := range want { // the NDJSON reader gives an empty chunk as []byte{}, the raw as an empty slice
			if len(want[i].Data) == 0 && len(got[i].Data) == 0 {
				want[i].Data, got[i].Data = nil, nil
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("raw events differ from the NDJSON's:\n got %+v\nwant %+v", got, want)
		}
		if !bytes.Equal(bytes.Join(wantLines, nil), ndjson) || !bytes.Equal(bytes.Join(gotLines, nil), ndjson) {
			t.Fatalf("raw lines are not the NDJSON stream byte for byte")
		}
		if len(raw) > len(ndjson)*4/5 {
			t.Fatalf("raw stream %d bytes, NDJSON %d: no base64 saved", len(raw), len(ndjson))
		}
	}
}

// Output travels as its bytes: a chunk's frame is its type, its length,
// its streamSeq and the bytes, nothing else.
func TestRawChunkFrameIsItsBytes(t *testing.T) {
	got := AppendRawChunk(nil, &protocol.Chunk{Kind: protocol.ChunkStdout, StreamSeq: 258, Data: []byte("hi")})
	want := []byte{'o', 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 1, 2, 'h', 'i'}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame % x, want % x", got, want)
	}
}

func rawFrame(t byte, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{t}, uint32(len(body))), body...)
}

// A frame that breaks the format is an error naming what is wrong, and a
// stream cut inside a frame is never a clean end.
func TestRawEventReaderRejects(t *testing.T) {
	seq := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	cases := []struct {
		name   string
		stream []byte
		want   error
		says   string
	}{
		{"unknown type", rawFrame('x', nil), ErrBadEvent, "unknown frame type 0x78"},
		{"over the bound", binary.BigEndian.AppendUint32([]byte{'o'}, MaxEventLine+1), ErrBadEvent, "over"},
		{"chunk without its streamSeq", rawFrame('o', []byte{1, 2, 3}), ErrBadEvent, "shorter than its streamSeq"},
		{"streamSeq past 2^53-1", rawFrame('e', seq(protocol.MaxSafeInteger+1)), ErrBadEvent, "past 2^53-1"},
		{"JSON over two lines", rawFrame('j', []byte("{\"event\":\n\"accepted\"}")), ErrBadEvent, "more than one line"},
		{"bad JSON", rawFrame('j', []byte("{")), ErrBadEvent, ""},
		{"bad base64 in a JSON chunk", rawFrame('j', []byte(`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk"}`)), ErrBadEvent, ""},
		{"cut in the head", []byte{'o', 0, 0}, io.ErrUnexpectedEOF, ""},
		{"cut in the body", rawFrame('o', seq(1))[:9], io.ErrUnexpectedEOF, ""},
	}
	for _, c := range cases {
		_, err := NewRawEventReader(bytes.NewReader(c.stream)).Next()
		if !errors.Is(err, c.want) || !strings.Contains(fmtErr(err), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
	if _, err := NewRawEventReader(bytes.NewReader(nil)).Next(); err != io.EOF {
		t.Errorf("an empty stream: %v, want io.EOF", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestAcceptsRawStream(t *testing.T) {
	cases := []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"*/*"}, false},
		{[]string{"application/x-ndjson"}, false},
		{[]string{ContentTypeRawStream}, true},
		{[]string{"application/x-ndjson;q=0.5, application/vnd.sema.stream"}, true},
		{[]string{"application/json", "Application/Vnd.Sema.Stream; q=0.9"}, true},
		{[]string{"application/vnd.sema.stream;q=0"}, false},
		{[]string{"application/vnd.sema.stream;q=x"}, false},
		{[]string{"application/vnd.sema.streamx"}, false},
	}
	for _, c := range cases {
		if got := AcceptsRawStream(c.accept); got != c.want {
			t.Errorf("Accept %q: %v, want %v", c.accept, got, c.want)
		}
	}
}

// FuzzRawEventReader: any bytes are read without a panic, every event the
// reader returns is encoded again to the very frame it came from (chunk
// frames) or its JSON, and chunks written are read back as they were.
func FuzzRawEventReader(f *testing.F) {
	_, raw := bothStreams(f, []protocol.Chunk{{Kind: protocol.ChunkStdout, StreamSeq: 1, Data: []byte("hi")}, {Kind: protocol.ChunkExit, StreamSeq: 2}},
		protocol.ExecOutcome{ExitCode: 0}, false)
	f.Add(raw, byte('o'), uint64(0), []byte("x"))
	f.Add([]byte{'o', 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0}, byte('d'), uint64(protocol.MaxSafeInteger), []byte{})
	f.Add([]byte("j\x00\x00\x00\x02{}"), byte('e'), uint64(7), []byte{0xff})
	f.Fuzz(func(t *testing.T, stream []byte, kindByte byte, seq uint64, data []byte) {
		r := NewRawEventReader(bytes.NewReader(stream))
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			_ = r.Line()
			if e.Event == EventChunk && e.ExitCode == nil && e.Kind != "" {
				if _, ok := rawKinds[e.Kind]; ok {
					again := AppendRawChunk(nil, &protocol.Chunk{Kind: e.Kind, StreamSeq: e.StreamSeq, Data: e.Data})
					if !bytes.Contains(stream, again) {
						t.Fatalf("chunk %+v encodes to a frame not in the stream", e)
					}
				}
			}
		}
		kinds := []protocol.ChunkKind{protocol.ChunkStdout, protocol.ChunkStderr, protocol.ChunkData}
		ch := protocol.Chunk{Kind: kinds[int(kindByte)%3], StreamSeq: int64(seq % (protocol.MaxSafeInteger + 1)), Data: data}
		e, err := NewRawEventReader(bytes.NewReader(AppendRawChunk(nil, &ch))).Next()
		if err != nil || e.Kind != ch.Kind || e.StreamSeq != ch.StreamSeq || !bytes.Equal(e.Data, ch.Data) {
			t.Fatalf("round trip of %+v: %+v, %v", ch, e, err)
		}
	})
}
