package lane

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"github.com/sema-agent/sema/api"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// rawLines reads a stream's lines as bytes, as they arrive.
// headers are name, value pairs.
func rawLines(t *testing.T, l *wsLane, deviceID, body string, headers ...string) <-chan []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", l.url+"/v1/devices/"+deviceID+"/instructions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.ownerKey)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("post: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	lines := make(chan []byte, 1024)
	go func() {
		defer close(lines)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	return lines
}

func nextLine(t *testing.T, lines <-chan []byte) []byte {
	t.Helper()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatal("the stream ended")
		}
		return line
	case <-time.After(waitBound):
		t.Fatal("no line within the wait bound: an event was left unflushed")
	}
	return nil
}

// Each event reaches the reader while nothing follows it: the accepted line
// before the device has output anything, each chunk before the next one
// exists. The device's base64 comes through as it was sent.
func TestEventsAreFlushedWhenNoneFollows(t *testing.T) {
	_, fd, lines, in := execStreamOverHTTP(t)
	if got, want := nextLine(t, lines), api.AppendAcceptedLine(nil, in.InstructionID); !bytes.Equal(got, want) {
		t.Fatalf("first line %s, want %s", got, want)
	}
	for seq := range int64(3) {
		data := bytes.Repeat([]byte{byte('a' + seq)}, 1000*int(seq))
		fd.sendText(fmt.Sprintf(`{"t":"chunk","gen":"%s","instructionId":"%s","streamSeq":%d,"kind":"stdout","dataB64":"%s"}`,
			fd.gen, in.InstructionID, seq, base64.StdEncoding.EncodeToString(data)))
		want := api.AppendChunkLine(nil, &protocol.Chunk{Kind: protocol.ChunkStdout, StreamSeq: seq, Data: data})
		if got := nextLine(t, lines); !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: %.80s, want %.80s", seq, got, want)
		}
	}
	fd.exit(in.InstructionID, 3, 0)
	if got := nextLine(t, lines); string(got) != `{"event":"chunk","kind":"exit","streamSeq":3,"exitCode":0}`+"\n" {
		t.Fatalf("exit line %s", got)
	}
	fd.result(in.InstructionID, 0, protocol.ExecOutcome{ExitCode: 0})
	if got := nextLine(t, lines); !bytes.HasPrefix(got, []byte(`{"event":"outcome","outcome":{"ok":true,"kind":"exec","exitCode":0`)) {
		t.Fatalf("outcome line %s", got)
	}
}

// Output that arrives faster than it is written is gathered into larger
// writes: every line still comes out whole and in order.
func TestEventsGatheredAreWholeAndInOrder(t *testing.T) {
	_, fd, lines, in := execStreamOverHTTP(t)
	nextLine(t, lines)
	const n = 40
	data := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB: the backlog stays inside the ack window
	go func() {
		for seq := range int64(n) {
			fd.chunk(in.InstructionID, seq, protocol.ChunkStdout, string(data))
		}
		fd.exit(in.InstructionID, n, 0)
		fd.result(in.InstructionID, 0, protocol.ExecOutcome{ExitCode: 0})
	}()
	for seq := range int64(n) {
		want := api.AppendChunkLine(nil, &protocol.Chunk{Kind: protocol.ChunkStdout, StreamSeq: seq, Data: data})
		if got := nextLine(t, lines); !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: %.80s…, want %.80s…", seq, got, want)
		}
	}
	nextLine(t, lines) // exit
	if got := nextLine(t, lines); !bytes.HasPrefix(got, []byte(`{"event":"outcome"`)) {
		t.Fatalf("outcome line %s", got)
	}
}

// §4 Encoding: a chunk whose base64 is not canonical is refused as before,
// and never reaches the stream; the canonical chunk after it does.
func TestNonCanonicalBase64FromADeviceIsRefused(t *testing.T) {
	l, fd, lines, in := execStreamOverHTTP(t)
	nextLine(t, lines)
	for _, bad := range []string{`aGl=`, `aGk`, `aGk=\n`, `aG\r\nk=`, `aGk==`, `aGk-`, `aGk=aGk=`, `\u0000aGk`} {
		fd.sendText(fmt.Sprintf(`{"t":"chunk","gen":"%s","instructionId":"%s","streamSeq":0,"kind":"stdout","dataB64":"%s"}`, fd.gen, in.InstructionID, bad))
	}
	l.wantRejected(fd.id, slices.Repeat([]string{"bad_shape"}, 8)...)
	fd.chunk(in.InstructionID, 0, protocol.ChunkStdout, "hi")
	if got := nextLine(t, lines); string(got) != `{"event":"chunk","kind":"stdout","streamSeq":0,"dataB64":"aGk="}`+"\n" {
		t.Fatalf("line %s", got)
	}
}

// Chunks of the recommended size, in pooled memory the stream releases
// line by line, come out byte-exact even when they wait in the reorder
// buffer while later decodes reuse released memory.
func TestPooledChunksComeOutWholeThroughTheReorderBuffer(t *testing.T) {
	_, fd, lines, in := execStreamOverHTTP(t)
	nextLine(t, lines)
	data := func(seq int64) []byte {
		return bytes.Repeat([]byte{byte('a' + seq)}, protocol.RecommendedChunkBytes)
	}
	// 1, 3 and 5 wait in the reorder buffer for 0, 2 and 4.
	for _, seq := range []int64{1, 0, 3, 2, 5, 4} {
		fd.chunk(in.InstructionID, seq, protocol.ChunkStdout, string(data(seq)))
	}
	for seq := range int64(6) {
		want := api.AppendChunkLine(nil, &protocol.Chunk{Kind: protocol.ChunkStdout, StreamSeq: seq, Data: data(seq)})
		if got := nextLine(t, lines); !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: %.80s…, want %.80s…", seq, got, want)
		}
	}
}

// execStreamOverHTTP posts an execStream through the lane's HTTP API to a
// fake device and returns its raw NDJSON lines and the instruction the
// device got.
func execStreamOverHTTP(t *testing.T) (*wsLane, *fakeDevice, <-chan []byte, *protocol.Instruction) {
	t.Helper()
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	lines := rawLines(t, l, fd.id, `{"kind":"execStream","args":{"command":"x"},"timeoutMs":5000}`)
	return l, fd, lines, fd.instruction()
}
