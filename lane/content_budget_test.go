package lane

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// The buffered-content budget (Config.MaxBufferedContent): write content
// held in memory at once is bounded server-wide, admitted by
// Content-Length before the body is read.

func TestContentBudgetArithmetic(t *testing.T) {
	b := newContentBudget(100, nil)
	r1, ok := b.reserve(60)
	if !ok {
		t.Fatal("60 of 100 refused")
	}
	if _, ok := b.reserve(41); ok {
		t.Fatal("41 more admitted beside 60 of 100")
	}
	r2, ok := b.reserve(40)
	if !ok || b.inUse() != 100 {
		t.Fatalf("40 beside 60: ok %v, in use %d", ok, b.inUse())
	}
	r1.shrinkTo(10)
	r1.shrinkTo(20) // never grows
	if b.inUse() != 50 {
		t.Fatalf("after shrinking to 10: in use %d, want 50", b.inUse())
	}
	r1.release()
	r1.release() // exactly once
	if b.inUse() != 40 {
		t.Fatalf("after releasing twice: in use %d, want 40", b.inUse())
	}
	r2.release()
	var none *reservation
	none.release()
	none.shrinkTo(0)
	if b.inUse() != 0 {
		t.Fatalf("in use %d after every release", b.inUse())
	}
}

// A large release that leaves the budget (nearly) idle is the moment to
// hand memory back to the OS; small ones and busy budgets are not.
func TestContentBudgetQuietsAfterALargeRelease(t *testing.T) {
	quiet := 0
	b := newContentBudget(1<<30, func() { quiet++ })
	big, _ := b.reserve(40 << 20)
	small, _ := b.reserve(10 << 20)
	small.release()
	if quiet != 0 {
		t.Fatalf("a 10 MiB release quieted the budget")
	}
	big.release()
	if quiet != 1 {
		t.Fatalf("releasing 40 MiB of 40: quiet %d, want 1", quiet)
	}
	r, _ := b.reserve(100 << 20)
	r.shrinkTo(70 << 20) // 30 MiB freed
	other, _ := b.reserve(40 << 20)
	r.release() // 70 MiB freed, 40 still held
	if quiet != 1 {
		t.Fatalf("quiet %d after releases that left the budget busy", quiet)
	}
	other.release()
	other.release()
	if quiet != 2 {
		t.Fatalf("quiet %d after the last large release, want 2", quiet)
	}
}

// The body cap follows the budget: the longest admissible body is the
// longest whose reservation (the body and its decoded content) fits.
func TestBodyCapFollowsTheBudget(t *testing.T) {
	for _, limit := range []int64{1 << 20, 1<<20 + 3, 4 << 20, DefaultMaxBufferedContent, 1 << 40} {
		n := maxInstructionBody(limit)
		if bodyReservation(n) > limit || bodyReservation(n+1) <= limit {
			t.Errorf("budget %d: cap %d reserves %d, cap+1 reserves %d", limit, n, bodyReservation(n), bodyReservation(n+1))
		}
	}
	// A 100 MiB write (about 134 MiB of JSON) fits the default budget.
	body := int64(len(writeInstructionBody(protocol.KindWriteFile, "/home/u/work/f", nil))) + int64(b64.EncodedLen(100<<20))
	if max := maxInstructionBody(DefaultMaxBufferedContent); body > max {
		t.Fatalf("a 100 MiB write is a %d-byte body, over the default cap %d", body, max)
	}
}

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
	l := newWSLane(t, func(c *Config) { c.MaxBufferedContent = limit; c.MaxInflight = 1 })
	fd := l.enroll()
	fd.establish()
	offline := l.enroll()
	inUse := func(want int64, when string) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d bytes in use %s", want, when), func() bool { return l.srv.budget.inUse() == want })
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
		t.Fatalf("write a: %d %s", r.status, r.body)
	}
	queued.next()
	inUse(int64(len(a)), "while write a is queued")

	// Over what is left now: 503 service.busy, Retry-After.
	r = refused(strings.NewReader(writeInstructionBody(protocol.KindWriteFile, "/w/b", patterned(1500<<10))), 503, "service.busy", "retry")
	if r.header.Get("Retry-After") != "2" {
		t.Fatalf("Retry-After %q, want 2", r.header.Get("Retry-After"))
	}
	if m := l.srv.Metrics(); m.ContentBusy != 1 {
		t.Fatalf("ContentBusy %d, want 1", m.ContentBusy)
	}
	// Over the whole budget: 413 naming the limit.
	refused(strings.NewReader(writeInstructionBody(protocol.KindWriteFile, "/w/c", patterned(2<<20))), 413, "request.body_too_large",
		strconv.FormatInt(maxInstructionBody(limit), 10))
	// Without Content-Length: a write is 411, so is any body over one frame.
	refused(chunked{strings.NewReader(writeInstructionBody(protocol.KindWriteFile, "/w/d", []byte("x")))}, 411, "request.length_required", "Content-Length")
	big := `{"kind":"exec","args":{"command":"` + strings.Repeat("x", protocol.MaxFrameBytes) + `"},"timeoutMs":1}`
	refused(chunked{strings.NewReader(big)}, 411, "request.length_required", "Content-Length")
	// Refusals after admission release what they reserved.
	refused(strings.NewReader(`{"kind":"writeFile","args":{"path":"/w/e"},"timeoutMs":1,"contentB64":"eA"}`), 400, "request.field_invalid", "contentB64")
	refused(chunked{strings.NewReader(`{"kind":"exec","args":{},"timeoutMs":1}`)}, 400, "request.field_invalid", "args.command")
	if _, r := l.postInstruction("dev_unknown", l.ownerKey, writeInstructionBody(protocol.KindWriteFile, "/w/f", a)); r.status != 404 {
		t.Fatalf("unknown device: %d %s", r.status, r.body)
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

// A 10 MiB write body is parsed with no copy of it: the decoded content
// is the only allocation in proportion to the body, also when contentB64
// escapes a character (JSON allows "\/").
func TestParsingAWriteAllocatesOnlyItsContent(t *testing.T) {
	content := patterned(10 << 20)
	plain := []byte(writeInstructionBody(protocol.KindWriteFile, "/w/f", content))
	enc := base64.StdEncoding.EncodeToString(content)
	escaped := bytes.Replace(plain, []byte(`"contentB64":"`+enc[:1]), fmt.Appendf(nil, `"contentB64":"\u%04x`, enc[0]), 1)
	escaped = bytes.ReplaceAll(escaped, []byte("/"), []byte(`\/`))
	if !bytes.Contains(escaped, []byte(`\/`)) || bytes.Equal(escaped, plain) {
		t.Fatal("the escaped body escapes nothing")
	}
	for name, body := range map[string][]byte{"plain": plain, "escaped": escaped} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		req, aerr := parseInstructionRequest(body, true)
		runtime.ReadMemStats(&after)
		if aerr != nil {
			t.Fatalf("%s: %v", name, aerr)
		}
		if !bytes.Equal(req.Content, content) {
			t.Fatalf("%s: the content differs", name)
		}
		if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(len(content))+256<<10; got > bound {
			t.Errorf("%s: parsing a %d-byte body allocated %d bytes, want at most the content and 256 KiB (%d)", name, len(body), got, bound)
		}
	}
}
