package api

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

func chunkLine(kind string, seq int64, data []byte) string {
	return fmt.Sprintf(`{"event":"chunk","kind":"%s","streamSeq":%d,"dataB64":"%s"}`+"\n", kind, seq, base64.StdEncoding.EncodeToString(data))
}

// readAll reads events to the end, copying Data (valid until the next Next).
func readAll(t *testing.T, next func() (Event, error)) ([]Event, error) {
	t.Helper()
	var out []Event
	for {
		e, err := next()
		if err != nil {
			return out, err
		}
		if e.Data != nil {
			e.Data = bytes.Clone(e.Data)
			if e.Data == nil {
				e.Data = []byte{}
			}
		}
		out = append(out, e)
	}
}

// slowOnly is the reader without its fast path: encoding/json for every line.
func slowOnly(r io.Reader) func() (Event, error) {
	er := NewEventReader(r)
	return func() (Event, error) {
		line, err := er.readLine()
		if err != nil {
			return Event{}, err
		}
		return slowEvent(line)
	}
}

// A stream as the lane writes it reads to the events it carries.
func TestEventReaderReadsTheLanesStream(t *testing.T) {
	big := make([]byte, 300000)
	for i := range big {
		big[i] = byte(i * 13)
	}
	stream := `{"event":"accepted","instructionId":"ins_1"}` + "\n" +
		chunkLine("stdout", 0, []byte("hi\n")) +
		chunkLine("stderr", 1, nil) +
		chunkLine("data", 2, big) +
		chunkLine("stdout", protocol.MaxSafeInteger, []byte{0xff}) +
		`{"event":"chunk","kind":"exit","streamSeq":3,"exitCode":7}` + "\n" +
		`{"event":"outcome","outcome":{"ok":true,"kind":"exec","exitCode":7},"state":"terminal"}` + "\n"
	got, err := readAll(t, NewEventReader(strings.NewReader(stream)).Next)
	if err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	seven := 7
	want := []Event{
		{Event: EventAccepted, InstructionID: "ins_1"},
		{Event: EventChunk, Kind: protocol.ChunkStdout, StreamSeq: 0, Data: []byte("hi\n")},
		{Event: EventChunk, Kind: protocol.ChunkStderr, StreamSeq: 1, Data: []byte{}},
		{Event: EventChunk, Kind: protocol.ChunkData, StreamSeq: 2, Data: big},
		{Event: EventChunk, Kind: protocol.ChunkStdout, StreamSeq: protocol.MaxSafeInteger, Data: []byte{0xff}},
		{Event: EventChunk, Kind: protocol.ChunkExit, StreamSeq: 3, ExitCode: &seven},
		{Event: EventOutcome, State: protocol.StateTerminal, Outcome: []byte(`{"ok":true,"kind":"exec","exitCode":7}`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %+v\nwant %+v", got, want)
	}
	slow, _ := readAll(t, slowOnly(strings.NewReader(stream)))
	if !reflect.DeepEqual(got, slow) {
		t.Fatalf("fast and slow differ:\n%+v\n%+v", got, slow)
	}
}

// Line is each event's line as the lane sent it, fast path or slow.
func TestEventReaderLineIsTheLineAsSent(t *testing.T) {
	lines := []string{
		`{"event":"accepted","instructionId":"ins_1"}` + "\n",
		chunkLine("stdout", 0, []byte("hi\n")),
		`{"event":"chunk","kind":"exit","streamSeq":1,"exitCode":0}` + "\n",
		`{"event":"outcome","outcome":{"ok":true,"kind":"exec","exitCode":0},"state":"terminal"}` + "\n",
	}
	er := NewEventReader(strings.NewReader(strings.Join(lines, "")))
	for i, want := range lines {
		if _, err := er.Next(); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if got := string(er.Line()); got != want {
			t.Errorf("line %d: %q, want %q", i, got, want)
		}
	}
}

// The fast path takes the lane's spelling and nothing else; a near miss
// reads as encoding/json reads it, error or event.
func TestEventReaderLeavesEveryDeviationToJSON(t *testing.T) {
	for _, line := range []string{
		`{"event":"chunk","kind":"stdout","streamSeq":01,"dataB64":"aGk="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":-1,"dataB64":"aGk="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1e3,"dataB64":"aGk="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":9007199254740993,"dataB64":"aGk="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGl="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk"}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aG\u0073="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"\/\/8="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk=","kind":"stderr"}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk="} `,
		`{"event":"chunk","kind":"stdin","streamSeq":1,"dataB64":"aGk="}`,
		`{"event":"chunk","kind":"stdoutx","streamSeq":1,"dataB64":"aGk="}`,
		`{"EVENT":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk="}`,
		`{"event":"chunk", "kind":"stdout","streamSeq":1,"dataB64":"aGk="}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk=\n"}`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk="`,
		`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk=""}`,
	} {
		r := NewEventReader(nil)
		if _, ok := r.fastChunk([]byte(line + "\n")); ok {
			t.Errorf("the fast path took %s", line)
		}
		fast, ferr := NewEventReader(strings.NewReader(line + "\n")).Next()
		slow, serr := slowEvent([]byte(line + "\n"))
		if fmt.Sprint(ferr) != fmt.Sprint(serr) || !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: Next %+v %v, encoding/json %+v %v", line, fast, ferr, slow, serr)
		}
	}
	line := `{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGk="}` + "\r\n"
	if e, err := NewEventReader(strings.NewReader(line)).Next(); err != nil || string(e.Data) != "hi" {
		t.Errorf("a CRLF line: %+v %v", e, err)
	}
}

// §4 Encoding holds on the client too: base64 that is not canonical is a
// bad line, whichever path reads it.
func TestEventReaderRefusesNonCanonicalBase64(t *testing.T) {
	for _, b := range []string{`aGl=`, `aGk`, `aGk==`, `aGk-`, `aG k=`, `aGk=\r\n`, `\/\/8`} {
		line := `{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"` + b + `"}` + "\n"
		if _, err := NewEventReader(strings.NewReader(line)).Next(); !errors.Is(err, ErrBadEvent) {
			t.Errorf("%s: %v, want ErrBadEvent", b, err)
		}
	}
}

// Data is reused from one fast chunk to the next, as documented: valid
// until the next call of Next.
func TestEventReaderReusesItsBuffer(t *testing.T) {
	stream := chunkLine("stdout", 0, []byte("abc")) + chunkLine("stdout", 1, []byte("xyz"))
	r := NewEventReader(strings.NewReader(stream))
	first, _ := r.Next()
	p := &first.Data[0]
	second, _ := r.Next()
	if string(second.Data) != "xyz" || &second.Data[0] != p {
		t.Errorf("second chunk %q, reused %v", second.Data, &second.Data[0] == p)
	}
}

// FuzzEventReaderAgreesWithJSON: the reader with its fast path yields
// exactly the events and errors of encoding/json on every line.
func FuzzEventReaderAgreesWithJSON(f *testing.F) {
	f.Add([]byte(chunkLine("stdout", 0, []byte("hi")) + chunkLine("data", 12, []byte{0, 1, 2, 0xff})))
	f.Add([]byte(chunkLine("stderr", 1, nil)))
	f.Add([]byte(`{"event":"accepted","instructionId":"ins_1"}` + "\n" + `{"event":"chunk","kind":"exit","streamSeq":3,"exitCode":7}` + "\n"))
	f.Add([]byte(`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"aGl="}` + "\n"))
	f.Add([]byte(`{"event":"chunk","kind":"stdout","streamSeq":00,"dataB64":"+/8="}` + "\n"))
	f.Add([]byte(`{"event":"chunk","kind":"data","streamSeq":999999999999999,"dataB64":"\/\/8="}` + "\n"))
	f.Add([]byte(`{"event":"outcome","outcome":{"ok":true},"state":"terminal"}` + "\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		fast, ferr := readAll(t, NewEventReader(bytes.NewReader(stream)).Next)
		slow, serr := readAll(t, slowOnly(bytes.NewReader(stream)))
		if fmt.Sprint(ferr) != fmt.Sprint(serr) {
			t.Fatalf("errors differ: fast %v, slow %v", ferr, serr)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("events differ:\nfast %+v\nslow %+v", fast, slow)
		}
	})
}

// BenchmarkEventReader: 64 KiB stdout chunks as the lane writes them, read
// with the fast path and with encoding/json alone; bytes are the output's.
func BenchmarkEventReader(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	var stream []byte
	for i := range 64 {
		stream = append(stream, chunkLine("stdout", int64(i), data)...)
	}
	for _, bc := range []struct {
		name string
		next func(io.Reader) func() (Event, error)
	}{
		{"fast", func(r io.Reader) func() (Event, error) { return NewEventReader(r).Next }},
		{"json", slowOnly},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(64 * len(data)))
			for b.Loop() {
				next := bc.next(bytes.NewReader(stream))
				for {
					if _, err := next(); err != nil {
						break
					}
				}
			}
		})
	}
}
