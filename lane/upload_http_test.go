package lane

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/b64"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

// postWrite posts a streamed write: body is sent with Content-Length n, or
// chunked when n < 0.
func (l *wsLane) postWrite(deviceID, apiKey, query string, body io.Reader, n int64) (*ndjsonStream, response) {
	l.t.Helper()
	req, err := http.NewRequestWithContext(l.t.Context(), "POST", l.url+"/v1/devices/"+deviceID+"/writes?"+query, body)
	if err != nil {
		l.t.Fatal(err)
	}
	req.ContentLength = n
	if n == 0 {
		req.Body = http.NoBody
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	s := &ndjsonStream{t: l.t, resp: resp, lines: make(chan map[string]any, 64)}
	l.t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"invalid": sc.Text()}
			}
			s.lines <- m
		}
	}()
	return s, response{Status: 200, Header: resp.Header}
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// The streamed write end to end: the accepted line arrives before a byte
// of the body was sent (full duplex), the instruction carries the query and
// the declared length and digest, the body arrives as ascending parts of
// at most PayloadPartBytes, and the outcome line follows. The upload's
// budget reservation is given back.
func TestStreamedWriteEndToEnd(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(append(defaultSupports, protocol.KindWriteFileExclusive)...)
	fd.establish()
	content := patterned(1<<20 + 3)
	pr, pw := io.Pipe()
	q := "kind=writeFileExclusive&path=/home/u/a%20b.bin&timeoutMs=60000&rootSessionId=ses_1&sha256=" + hexSum(content)
	s, r := l.postWrite(fd.id, l.ownerKey, q, pr, int64(len(content)))
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	accepted := s.next() // nothing of the body has been sent yet
	in := fd.instruction()
	if accepted["event"] != "accepted" || accepted["instructionId"] != in.InstructionID {
		t.Fatalf("first line %v", accepted)
	}
	a := in.Args.(protocol.WriteArgs)
	if in.Kind != protocol.KindWriteFileExclusive || a.Path != "/home/u/a b.bin" || a.ContentLen != int64(len(content)) ||
		a.SHA256.String() != hexSum(content) || in.TimeoutMs != 60000 || in.RootSessionID != "ses_1" || a.Expect != nil {
		t.Fatalf("instruction %+v args %+v", in, a)
	}
	// An upload holds one part, its base64 and room for a frame's fields.
	part := protocol.DefaultPayloadPartBytes
	if got, want := l.doors.Metrics().BufferedContent, int64(part+b64.EncodedLen(part)+1024); got != want {
		t.Fatalf("an upload holds %d bytes of the budget, want %d", got, want)
	}
	go func() {
		pw.Write(content)
		pw.Close()
	}()
	if got := payloadOf(t, fd, in, protocol.DefaultPayloadPartBytes); !bytes.Equal(got, content) {
		t.Fatal("payload mismatch")
	}
	fd.result(in.InstructionID, 0, protocol.WriteOutcome{CanonicalPath: a.Path, Inode: "9", Created: new(true)})
	if m := s.next(); m["event"] != "outcome" || m["state"] != "terminal" || m["outcome"].(map[string]any)["canonicalPath"] != a.Path {
		t.Fatalf("outcome line %v", m)
	}
	s.end()
	eventually(t, "the upload's reservation is released", func() bool { return l.doors.Metrics().BufferedContent == 0 })
}

// Refusals before anything is queued, each naming what is wrong.
func TestStreamedWriteRefusals(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	_, otherKey := l.user("mallory")
	sum := hexSum([]byte("x"))
	ok := "path=/w/f&timeoutMs=1000&sha256=" + sum
	refused := func(id, key, query string, n int64) response {
		t.Helper()
		var body io.Reader = strings.NewReader("x")
		if n < 0 {
			body = chunked{body}
		}
		s, r := l.postWrite(id, key, query, body, n)
		if s != nil {
			t.Fatalf("%s: 200, want a refusal", query)
		}
		return r
	}
	wantError(t, refused(fd.id, l.ownerKey, ok, -1), 411, "request.length_required", "Content-Length")
	wantError(t, refused(ids.New(ids.Device), l.ownerKey, ok, 1), 404, "device.not_found", "dev_")
	wantError(t, refused(fd.id, otherKey, ok, 1), 404, "device.not_found", fd.id)
	if r := refused(fd.id, "", ok, 1); r.Status != 403 {
		t.Fatalf("no credential: %d", r.Status)
	}
	cases := []struct{ query, code, mentions string }{
		{"timeoutMs=1000&sha256=" + sum, api.CodeBodyShape, `"path"`},
		{"path=/w/f&sha256=" + sum, api.CodeBodyShape, `"timeoutMs"`},
		{"path=/w/f&timeoutMs=1000", api.CodeBodyShape, `"sha256"`},
		{ok + "&mode=755", api.CodeBodyShape, `"mode"`},
		{ok + "&path=/w/g", api.CodeBodyShape, `"path" is given 2 times`},
		{ok + "&a=%zz", api.CodeBodyShape, "malformed"},
		{ok + "&kind=exec", api.CodeFieldInvalid, `kind "exec"`},
		{ok + "&kind=nope", api.CodeFieldInvalid, `kind "nope"`},
		{"path=w/f&timeoutMs=1000&sha256=" + sum, api.CodeFieldInvalid, "path"},
		{"path=/w/../f&timeoutMs=1000&sha256=" + sum, api.CodeFieldInvalid, "path"},
		{"path=/w/f%ff&timeoutMs=1000&sha256=" + sum, api.CodeFieldInvalid, "path"},
		{"path=/w/f&timeoutMs=0&sha256=" + sum, api.CodeFieldInvalid, "timeoutMs"},
		{"path=/w/f&timeoutMs=-5&sha256=" + sum, api.CodeFieldInvalid, "timeoutMs"},
		{"path=/w/f&timeoutMs=1.5&sha256=" + sum, api.CodeFieldInvalid, "timeoutMs"},
		{"path=/w/f&timeoutMs=09&sha256=" + sum, api.CodeFieldInvalid, "timeoutMs"},
		{"path=/w/f&timeoutMs=9007199254740992&sha256=" + sum, api.CodeFieldInvalid, "timeoutMs"},
		{"path=/w/f&timeoutMs=9223372036855&sha256=" + sum, api.CodeFieldInvalid, "at most 9223372036854"},
		{"path=/w/f&timeoutMs=1000&sha256=abc", api.CodeFieldInvalid, "sha256"},
		{"path=/w/f&timeoutMs=1000&sha256=" + strings.ToUpper(sum), api.CodeFieldInvalid, "sha256"},
		{"path=/w/f&timeoutMs=1000&sha256=" + strings.Repeat("g", 64), api.CodeFieldInvalid, "sha256"},
		{ok + `&expect={"canonicalPath":"/w/f"}`, api.CodeFieldInvalid, "expect is only for writeFileGuarded"},
		{ok + "&kind=writeFileGuarded", api.CodeFieldInvalid, "needs expect"},
		{ok + `&kind=writeFileGuarded&expect={"canonicalPath":"/w/f"},"x":1`, api.CodeFieldInvalid, "expect"},
		{ok + `&kind=writeFileGuarded&expect={"canonicalPath":5}`, api.CodeFieldInvalid, "expect.canonicalPath"},
	}
	for _, c := range cases {
		wantError(t, refused(fd.id, l.ownerKey, strings.ReplaceAll(c.query, `"`, "%22"), 1), 400, c.code, c.mentions)
	}
	if got := l.doors.Metrics().BufferedContent; got != 0 {
		t.Fatalf("refusals hold %d bytes of the budget", got)
	}
}

// A body that ends short: no chunk after it, the commit still carries the
// declared length and digest (so the device's check fails it, §3.4), and
// the settlement says the upload was short before the device's words.
func TestStreamedWriteShortContent(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	content := patterned(600 << 10)
	half := content[:300<<10]
	call := l.dispatch(fd, Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"}, Timeout: time.Minute,
		ContentStream: io.MultiReader(bytes.NewReader(half), failing{}), ContentLen: int64(len(content)), ContentSHA256: sha256.Sum256(content)})
	in := fd.instruction()
	var got int64
	for {
		p := expect[*protocol.Payload](fd, nil)
		if p.Part == protocol.PartCommit {
			if p.TotalLen != int64(len(content)) || p.SHA256 != protocol.Digest(sha256.Sum256(content)) {
				t.Fatalf("commit %+v: not the declared values", p)
			}
			break
		}
		got += int64(len(p.Data))
	}
	if got != protocol.DefaultPayloadPartBytes { // the one whole part before the stream failed
		t.Fatalf("%d bytes sent before the commit", got)
	}
	<-call.ContentReleased()
	fd.result(in.InstructionID, 0, protocol.Failure{ErrorCode: protocol.ErrInvalid, Message: "only 262144 of 614400 bytes arrived before commit"})
	f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrInvalid)
	if !strings.HasPrefix(f.Message, "the upload was short: the content ended after 307200 of the 614400 bytes declared (reading it failed: disk on fire)") ||
		!strings.HasSuffix(f.Message, "; the device answered: only 262144 of 614400 bytes arrived before commit") {
		t.Fatalf("message %q", f.Message)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// countingReader counts the bytes read from it; it never ends.
type countingReader struct{ n atomic.Int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	clear(p)
	r.n.Add(int64(len(p)))
	return len(p), nil
}

// A call that is never sent never reads its stream; a cancelled one stops
// reading and sending it (no commit), and lets go of it.
func TestStreamedWriteReadOnlyWhileWanted(t *testing.T) {
	l := newWSLane(t)
	offline := l.enroll()
	r := &countingReader{}
	big := Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"}, Timeout: time.Minute,
		ContentStream: r, ContentLen: 1 << 40}
	call := l.dispatch(offline, big)
	wantFailure(t, settled(t, call), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	<-call.ContentReleased()
	if r.n.Load() != 0 {
		t.Fatalf("a call never sent read %d bytes of its stream", r.n.Load())
	}

	fd := l.enroll()
	fd.establish()
	call = l.dispatch(fd, big)
	in := fd.instruction()
	expect(fd, func(p *protocol.Payload) bool { return p.Part == protocol.PartChunk })
	call.Cancel()
	fd.expectCancel(in.InstructionID)
	<-call.ContentReleased()
	read := r.n.Load()
	fd.result(in.InstructionID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
	settled(t, call)
	for _, f := range fd.barrier() {
		if p, ok := f.(*protocol.Payload); ok && p.Part == protocol.PartCommit {
			t.Fatal("a commit after the cancel")
		}
	}
	if read > 64*protocol.DefaultPayloadPartBytes || r.n.Load() != read {
		t.Fatalf("read %d bytes, then %d, after the cancel", read, r.n.Load())
	}
}

// Through HTTP, a device that is not connected: the outcome comes at once
// and the handler returns without having read the body.
func TestStreamedWriteOfflineDoesNotReadTheBody(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	pr, pw := io.Pipe()
	defer pw.Close()
	s, r := l.postWrite(fd.id, l.ownerKey, "path=/w/f&timeoutMs=1000&sha256="+hexSum(nil), pr, 1<<30)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	s.next()
	if m := s.next(); m["state"] != "terminal_never_started" || m["outcome"].(map[string]any)["errorCode"] != "target_unavailable" {
		t.Fatalf("outcome line %v", m)
	}
	s.end()
	eventually(t, "the reservation is released", func() bool { return l.doors.Metrics().BufferedContent == 0 })
}

// Uploads hold a small fixed share of the budget each; one that does not
// fit is 503 service.busy.
func TestStreamedWriteBudget(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxBufferedContent = protocol.MaxFrameBytes })
	fd := l.enroll()
	fd.establish()
	pr, pw := io.Pipe()
	defer pw.Close()
	q := "path=/w/f&timeoutMs=60000&sha256=" + hexSum(nil)
	s, r := l.postWrite(fd.id, l.ownerKey, q, pr, 10)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	s.next()
	_, r = l.postWrite(fd.id, l.ownerKey, q, strings.NewReader("0123456789"), 10)
	wantError(t, r, 503, api.CodeBusy, "retry")
	in := fd.instruction()
	pw.Write([]byte("0123456789"))
	expect(fd, func(p *protocol.Payload) bool { return p.Part == protocol.PartCommit })
	fd.result(in.InstructionID, 0, protocol.Failure{ErrorCode: protocol.ErrInvalid, Message: "digest"})
	s.next()
	s.end()
	eventually(t, "the reservation is released", func() bool { return l.doors.Metrics().BufferedContent == 0 })
}

// A client that sends "Expect: 100-continue" gets it before the answer's
// header: a Go client that would otherwise hold its body back for twice
// the wait bound sends it at once, and the upload completes.
func TestStreamedWriteExpectContinue(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	content := patterned(300 << 10)
	req, _ := http.NewRequestWithContext(t.Context(), "POST",
		l.url+"/v1/devices/"+fd.id+"/writes?path=/w/f&timeoutMs=60000&sha256="+hexSum(content), bytes.NewReader(content))
	req.Header.Set("Authorization", "Bearer "+l.ownerKey)
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 2 * waitBound}}
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	in := fd.instruction()
	if got := payloadOf(t, fd, in, protocol.DefaultPayloadPartBytes); !bytes.Equal(got, content) {
		t.Fatal("payload mismatch")
	}
	fd.result(in.InstructionID, 0, protocol.WriteOutcome{CanonicalPath: "/w/f"})
	resp := <-answered
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"event":"outcome"`) || !strings.Contains(string(b), `"canonicalPath":"/w/f"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
