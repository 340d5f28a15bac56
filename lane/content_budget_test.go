package lane

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// The buffered-content budget (Config.MaxBufferedContent): write content
// held in memory at once is bounded server-wide, admitted by
// Content-Length before the body is read.

// writeInstructionBody is an instruction body for a write of content.
func writeInstructionBody(kind protocol.InstructionKind, path string, content []byte) string {
	return fmt.Sprintf(`{"kind":%q,"args":{"path":%q},"timeoutMs":60000,"contentB64":%q}`,
		kind, path, base64.StdEncoding.EncodeToString(content))
}

func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

// chunked hides a body's length, so the client sends it chunked, without
// Content-Length.
type chunked struct{ io.Reader }

// Admission by Content-Length before the body is read: 413 naming the
// limit for a body that could never fit, 503 service.busy with Retry-After
// for one that does not fit now, 411 for a write without Content-Length;
// and the reservation covers a write's content until the lane has sent it,
// released on every path.
func TestContentBudgetAdmission(t *testing.T) {
	const limit = 4 << 20
	l := newWSLane(t, func(c *Config) {
		c.MaxBufferedContent = limit
		c.MaxBufferedContentPerIdentity = limit
		c.MaxInflight = 1
	})
	fd := l.enroll()
	fd.establish()
	offline := l.enroll()
	inUse := func(want int64, when string) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d bytes in use %s", want, when), func() bool { return l.doors.Metrics().BufferedContent == want })
	}
	refused := func(body io.Reader, status int, code, mentions string) response {
		t.Helper()
		s, r := l.postInstructionFrom(fd.id, l.ownerKey, body)
		if s != nil {
			t.Fatalf("200, want %d %s", status, code)
		}
		wantError(t, r, status, code, mentions)
		return r
	}

	// An exec holds the one in-flight slot; its body holds nothing once parsed.
	exec, _ := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"hold"},"timeoutMs":60000}`)
	execID := exec.next()["instructionId"].(string)
	fd.instructionFor(execID)
	inUse(0, "after an exec was parsed")

	// A queued write holds exactly its content.
	a := patterned(1 << 20)
	queued, r := l.postInstruction(fd.id, l.ownerKey, writeInstructionBody(protocol.KindWriteFile, "/w/a", a))
	if queued == nil {
		t.Fatalf("write a: %d %s", r.Status, r.Body)
	}
	queued.next()
	inUse(int64(len(a)), "while write a is queued")

	// Over what is left now: 503 service.busy, Retry-After.
	r = refused(strings.NewReader(writeInstructionBody(protocol.KindWriteFile, "/w/b", patterned(1500<<10))), 503, "service.busy", "retry")
	if r.Header.Get("Retry-After") != "2" {
		t.Fatalf("Retry-After %q, want 2", r.Header.Get("Retry-After"))
	}
	if m := l.doors.Metrics(); m.ContentBusy != 1 {
		t.Fatalf("ContentBusy %d, want 1", m.ContentBusy)
	}
	// Over the whole budget: 413 naming the limit.
	refused(strings.NewReader(writeInstructionBody(protocol.KindWriteFile, "/w/c", patterned(2<<20))), 413, "request.body_too_large",
		strconv.FormatInt(limit, 10)+"-byte buffered-content budget")
	// Without Content-Length: a write is 411, so is any body over one frame.
	refused(chunked{strings.NewReader(writeInstructionBody(protocol.KindWriteFile, "/w/d", []byte("x")))}, 411, "request.length_required", "Content-Length")
	big := `{"kind":"exec","args":{"command":"` + strings.Repeat("x", protocol.MaxFrameBytes) + `"},"timeoutMs":1}`
	refused(chunked{strings.NewReader(big)}, 411, "request.length_required", "Content-Length")
	// Refusals after admission release what they reserved.
	refused(strings.NewReader(`{"kind":"writeFile","args":{"path":"/w/e"},"timeoutMs":1,"contentB64":"eA"}`), 400, "request.field_invalid", "contentB64")
	refused(chunked{strings.NewReader(`{"kind":"exec","args":{},"timeoutMs":1}`)}, 400, "request.field_invalid", "args.command")
	if _, r := l.postInstruction("dev_unknown", l.ownerKey, writeInstructionBody(protocol.KindWriteFile, "/w/f", a)); r.Status != 404 {
		t.Fatalf("unknown device: %d %s", r.Status, r.Body)
	}
	inUse(int64(len(a)), "after the refusals")
	// A device that is not connected settles at once, and lets go at once.
	s, _ := l.postInstruction(offline.id, l.ownerKey, writeInstructionBody(protocol.KindWriteFile, "/w/g", a))
	s.next()
	if m := s.next(); m["state"] != "terminal_never_started" {
		t.Fatalf("offline write: %v", m)
	}
	inUse(int64(len(a)), "after a write to an offline device")

	// The client of the queued write goes away: it settles never started,
	// and its content is released.
	queued.resp.Body.Close()
	inUse(0, "after the queued write was cancelled")

	// A committed write holds its content until its payload is written,
	// not until it settles.
	c := patterned(1 << 20)
	sent, _ := l.postInstruction(fd.id, l.ownerKey, writeInstructionBody(protocol.KindWriteFile, "/w/c", c))
	cID := sent.next()["instructionId"].(string)
	inUse(int64(len(c)), "while write c is queued")
	fd.result(execID, 0, protocol.ExecOutcome{ExitCode: 0})
	fd.expectResultAck(execID)
	if got := payloadOf(t, fd, fd.instructionFor(cID), protocol.DefaultPayloadPartBytes); !bytes.Equal(got, c) {
		t.Fatal("write c's payload differs")
	}
	inUse(0, "once write c's payload was written, before it settled")
	fd.result(cID, 1, protocol.WriteOutcome{CanonicalPath: "/w/c"})
	if m := sent.next(); m["state"] != "terminal" {
		t.Fatalf("write c: %v", m)
	}

	// Shutdown settles a queued write and releases it.
	hold, _ := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"hold"},"timeoutMs":60000}`)
	fd.instructionFor(hold.next()["instructionId"].(string))
	last, _ := l.postInstruction(fd.id, l.ownerKey, writeInstructionBody(protocol.KindWriteFile, "/w/h", a))
	last.next()
	inUse(int64(len(a)), "while write h is queued")
	l.srv.Shutdown(t.Context())
	inUse(0, "after Shutdown")
}
