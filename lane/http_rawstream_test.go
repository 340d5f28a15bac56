package lane

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// postAccepting posts an exec with the Accept values given (none: no
// header), plays the same output, exit and result as the device, and
// returns the answer's Content-Type, its whole body and the instruction.
func postAccepting(t *testing.T, l *wsLane, fd *fakeDevice, accept ...string) (contentType string, body []byte, id string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", l.url+"/v1/devices/"+fd.id+"/instructions",
		strings.NewReader(`{"kind":"exec","args":{"command":"x"},"timeoutMs":5000}`))
	req.Header.Set("Authorization", "Bearer "+l.ownerKey)
	for _, a := range accept {
		req.Header.Add("Accept", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST: %v %v", resp, err)
	}
	defer resp.Body.Close()
	in := fd.instruction()
	fd.chunk(in.InstructionID, 0, protocol.ChunkStdout, "hi\n")
	fd.chunk(in.InstructionID, 1, protocol.ChunkStderr, "\x00\xff<&>\"\\\n")
	fd.chunk(in.InstructionID, 2, protocol.ChunkStdout, "")
	fd.exit(in.InstructionID, 3, 3)
	fd.result(in.InstructionID, 0, protocol.ExecOutcome{ExitCode: 3})
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Get("Content-Type"), body, in.InstructionID
}

// wantNDJSON is the NDJSON stream of postAccepting's play, as the lane
// has always written it (the outcome line's keys in encoding/json's order).
func wantNDJSON(id string) string {
	b64 := base64.StdEncoding.EncodeToString
	return `{"event":"accepted","instructionId":"` + id + `"}` + "\n" +
		`{"event":"chunk","kind":"stdout","streamSeq":0,"dataB64":"` + b64([]byte("hi\n")) + `"}` + "\n" +
		`{"event":"chunk","kind":"stderr","streamSeq":1,"dataB64":"` + b64([]byte("\x00\xff<&>\"\\\n")) + `"}` + "\n" +
		`{"event":"chunk","kind":"stdout","streamSeq":2,"dataB64":""}` + "\n" +
		`{"event":"chunk","kind":"exit","streamSeq":3,"exitCode":3}` + "\n" +
		`{"event":"outcome","outcome":{"ok":true,"kind":"exec","exitCode":3},"state":"terminal"}` + "\n"
}

// NDJSON stays the default, byte for byte, for a client that does not
// name the raw stream in its Accept (or refuses it with q=0).
func TestNDJSONStaysTheDefaultByteForByte(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	for _, accept := range [][]string{nil, {"*/*"}, {"application/x-ndjson"}, {"application/json"}, {api.ContentTypeRawStream + ";q=0"}} {
		ct, body, id := postAccepting(t, l, fd, accept...)
		if ct != "application/x-ndjson" {
			t.Fatalf("Accept %q: Content-Type %q", accept, ct)
		}
		if want := wantNDJSON(id); string(body) != want {
			t.Fatalf("Accept %q: the NDJSON stream changed:\n got %q\nwant %q", accept, body, want)
		}
	}
}

// A client that asks for the raw stream gets the same events, output as
// its bytes: read back as NDJSON lines, they are the NDJSON stream byte
// for byte.
func TestRawStreamCarriesTheNDJSONEvents(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	for _, accept := range [][]string{{api.ContentTypeRawStream}, {"application/x-ndjson;q=0.5, " + api.ContentTypeRawStream}} {
		ct, body, id := postAccepting(t, l, fd, accept...)
		if ct != api.ContentTypeRawStream {
			t.Fatalf("Accept %q: Content-Type %q", accept, ct)
		}
		if bytes.Contains(body, []byte(base64.StdEncoding.EncodeToString([]byte("hi\n")))) || !bytes.Contains(body, []byte("\x00\xff<&>\"\\\n")) {
			t.Fatalf("Accept %q: output not carried as its bytes: %q", accept, body)
		}
		r := api.NewRawEventReader(bytes.NewReader(body))
		var lines []byte
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("Accept %q: %v in %q", accept, err, body)
			}
			lines = append(lines, r.Line()...)
		}
		if want := wantNDJSON(id); string(lines) != want {
			t.Fatalf("Accept %q: the raw stream's events differ:\n got %q\nwant %q", accept, lines, want)
		}
	}
}
