package lane

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// halfDuplexWrite posts a streamed write of n bytes read from body with
// Sema-Half-Duplex: 1; the answer arrives on the channel once its header
// does, and bodySent tells whether the whole body had been sent by then.
func halfDuplexWrite(t *testing.T, l *wsLane, deviceID, query string, body io.Reader, n int64) (answer <-chan *http.Response, bodySent *atomic.Bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", l.url+"/v1/devices/"+deviceID+"/writes?"+query, &sentBody{Reader: body, left: n})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set("Authorization", "Bearer "+l.ownerKey)
	req.Header.Set(api.HeaderHalfDuplex, "1")
	answered, sent := make(chan *http.Response, 1), &atomic.Bool{}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		sent.Store(req.Body.(*sentBody).done.Load())
		if err != nil {
			t.Error(err)
		} else {
			t.Cleanup(func() { resp.Body.Close() })
		}
		answered <- resp
	}()
	return answered, sent
}

// sentBody marks when the last byte of a request body has been taken.
type sentBody struct {
	io.Reader
	left int64
	done atomic.Bool
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if b.left -= int64(n); b.left <= 0 {
		b.done.Store(true)
	}
	return n, err
}

func (b *sentBody) Close() error { return nil }

func answerLines(t *testing.T, resp *http.Response) []string {
	t.Helper()
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("answer %+v; want 200", resp)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		ev, _, _ := strings.Cut(strings.TrimPrefix(sc.Text(), `{"event":"`), `"`)
		events = append(events, ev)
	}
	return events
}

// api.HeaderHalfDuplex: the answer to a streamed write, its accepted line
// included, waits until the lane has read the whole body. A proxy that
// stops sending a request's body once the answer begins (nginx) would
// otherwise hold the rest back until the write timed out.
func TestAHalfDuplexWriteIsAnsweredOnceItsBodyIsRead(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(append(defaultSupports, protocol.KindWriteFileExclusive)...)
	fd.establish()
	content := patterned(1<<20 + 3)
	// The second half of the body is sent only once the device has the
	// instruction: an answer that did not wait would have begun by then.
	pr, pw := io.Pipe()
	more := make(chan struct{})
	go func() {
		pw.Write(content[:len(content)/2])
		<-more
		pw.Write(content[len(content)/2:])
		pw.Close()
	}()
	answered, sent := halfDuplexWrite(t, l, fd.id, "kind=writeFileExclusive&path=/home/u/h.bin&timeoutMs=60000&sha256="+hexSum(content), pr, int64(len(content)))
	in := fd.instruction()
	close(more)
	if got := payloadOf(t, fd, in, protocol.DefaultPayloadPartBytes); string(got) != string(content) {
		t.Fatal("the payload differs from the body")
	}
	resp := <-answered
	if !sent.Load() {
		t.Fatal("the answer began before the whole body was sent")
	}
	fd.result(in.InstructionID, 0, protocol.WriteOutcome{CanonicalPath: "/home/u/h.bin", Inode: "9", Created: new(true)})
	if got := answerLines(t, resp); strings.Join(got, ",") != "accepted,outcome" {
		t.Fatalf("events %v; want accepted, outcome", got)
	}
}

// api.HeaderHalfDuplex: an instruction that settles before its body is
// read (the device refused it) is answered then, not held for a body that
// will never be read.
func TestAHalfDuplexWriteThatSettlesFirstIsAnswered(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(append(defaultSupports, protocol.KindWriteFileExclusive)...)
	fd.establish()
	pr, pw := io.Pipe() // the body never comes
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	answered, _ := halfDuplexWrite(t, l, fd.id, "kind=writeFileExclusive&path=/etc/h.bin&timeoutMs=60000&sha256="+hexSum(patterned(1<<20)), pr, 1<<20)
	in := fd.instruction()
	fd.result(in.InstructionID, 0, protocol.Failure{ErrorCode: protocol.ErrPermissionDenied, Message: "no"})
	if got := answerLines(t, <-answered); strings.Join(got, ",") != "accepted,outcome" {
		t.Fatalf("events %v; want accepted, outcome", got)
	}
}
