package lane

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

// The HTTP instruction API end to end: accepted, chunks in order as they
// are accepted, then the outcome, each line flushed as it happens.
func TestHTTPInstructionsEndToEnd(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	s, r := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"echo hi"},"cwd":"/home/u/work","shellEnv":{"A":"1"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q", ct)
	}
	accepted := s.next() // flushed before the device has done anything
	in := fd.instruction()
	if accepted["event"] != "accepted" || accepted["instructionId"] != in.InstructionID || len(accepted) != 2 {
		t.Fatalf("first line %v for instruction %s", accepted, in.InstructionID)
	}
	if in.Cwd != "/home/u/work" || in.ShellEnv["A"] != "1" || in.TimeoutMs != 5000 {
		t.Fatalf("instruction %+v", in)
	}
	fd.chunk(in.InstructionID, 0, protocol.ChunkStdout, "hi\n")
	if m := s.next(); m["event"] != "chunk" || m["kind"] != "stdout" || m["streamSeq"] != 0.0 || m["dataB64"] != "aGkK" {
		t.Fatalf("chunk line %v", m)
	}
	fd.chunk(in.InstructionID, 1, protocol.ChunkStderr, "")
	if m := s.next(); m["kind"] != "stderr" || m["dataB64"] != "" {
		t.Fatalf("empty chunk line %v", m)
	}
	fd.exit(in.InstructionID, 2, 0)
	if m := s.next(); m["event"] != "chunk" || m["kind"] != "exit" || m["streamSeq"] != 2.0 || m["exitCode"] != 0.0 || m["dataB64"] != nil {
		t.Fatalf("exit line %v", m)
	}
	fd.result(in.InstructionID, 0, protocol.ExecOutcome{ExitCode: 0})
	m := s.next()
	o, _ := m["outcome"].(map[string]any)
	if m["event"] != "outcome" || m["state"] != "terminal" || o["ok"] != true || o["kind"] != "exec" || o["exitCode"] != 0.0 {
		t.Fatalf("outcome line %v", m)
	}
	s.end()

	// A write with contentB64: the server computes contentLen and sha256.
	// (expect, an object, is the last member of args, as a client may well send it)
	content := []byte("package main\n")
	body := `{"kind":"writeFileGuarded","timeoutMs":5000,"contentB64":"` + base64.StdEncoding.EncodeToString(content) +
		`","args":{"path":"/home/u/work/main.go","expect":{"canonicalPath":"/home/u/work/main.go","fileId":"7"}}}`
	fd2 := l.enroll(append(defaultSupports, protocol.KindWriteFileGuarded)...)
	fd2.establish()
	s, r = l.postInstruction(fd2.id, l.ownerKey, string(body))
	if s == nil {
		t.Fatalf("writeFileGuarded: status %d %s", r.Status, r.Body)
	}
	s.next()
	win := fd2.instruction()
	if wa := win.Args.(protocol.WriteArgs); wa.Expect == nil || wa.Expect.FileID != "7" {
		t.Fatalf("args %+v", wa)
	}
	if got := payloadOf(t, fd2, win, protocol.DefaultPayloadPartBytes); !bytes.Equal(got, content) {
		t.Fatal("payload mismatch")
	}
	fd2.result(win.InstructionID, 0, protocol.Failure{ErrorCode: protocol.ErrPreconditionFailed, Message: "fileId changed"})
	if m := s.next(); m["state"] != "terminal" || m["outcome"].(map[string]any)["errorCode"] != "precondition_failed" {
		t.Fatalf("outcome line %v", m)
	}
	s.end()
}

// A device that is not connected: 200, accepted, then the outcome
// target_unavailable with state terminal_never_started.
func TestHTTPInstructionsTargetUnavailable(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	s, r := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"x"},"timeoutMs":1000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	if m := s.next(); m["event"] != "accepted" {
		t.Fatalf("first line %v", m)
	}
	m := s.next()
	o, _ := m["outcome"].(map[string]any)
	if m["event"] != "outcome" || m["state"] != "terminal_never_started" || o["ok"] != false || o["errorCode"] != "target_unavailable" || o["message"] == "" {
		t.Fatalf("outcome line %v", m)
	}
	s.end()
}

// Refusals before anything is queued: 404 for an unknown (or another
// user's) device, 400 naming the field.
func TestHTTPInstructionsRefusals(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	_, otherKey := l.user("mallory")
	ok := `{"kind":"exec","args":{"command":"x"},"timeoutMs":1000}`
	post := func(id, key, body string) response {
		t.Helper()
		s, r := l.postInstruction(id, key, body)
		if s != nil {
			t.Fatalf("%s: 200, want a refusal", body)
		}
		return r
	}
	wantError(t, post(ids.New(ids.Device), l.ownerKey, ok), 404, "device.not_found", "dev_")
	wantError(t, post(fd.id, otherKey, ok), 404, "device.not_found", fd.id)
	if r := post(fd.id, "", ok); r.Status != 403 {
		t.Fatalf("no credential: %d", r.Status)
	}
	cases := []struct{ body, code, mentions string }{
		{`{"kind":"exec"`, "request.invalid_json", "JSON"},
		{`[]`, "request.body_shape", "object"},
		// A repeated key is the body's shape, as docs/api.md says, at any
		// depth: the lane and the device must never read two commands.
		{`{"kind":"exec","kind":"exec","args":{"command":"x"},"timeoutMs":1}`, "request.body_shape", "repeats a key"},
		{`{"kind":"exec","args":{"command":"echo A","command":"echo B"},"timeoutMs":1}`, "request.body_shape", "repeats a key"},
		{`{"args":{"command":"x"},"timeoutMs":1}`, "request.body_shape", `"kind"`},
		{`{"kind":"exec","timeoutMs":1}`, "request.body_shape", `"args"`},
		{`{"kind":"exec","args":{"command":"x"}}`, "request.body_shape", `"timeoutMs"`},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":1,"deviceId":"x"}`, "request.body_shape", `"deviceId"`},
		{`{"kind":"teleport","args":{},"timeoutMs":1}`, "request.field_invalid", "kind"},
		{`{"kind":7,"args":{},"timeoutMs":1}`, "request.field_invalid", "kind"},
		{`{"kind":"exec","args":"x","timeoutMs":1}`, "request.field_invalid", "args"},
		{`{"kind":"exec","args":{},"timeoutMs":1}`, "request.field_invalid", "args.command"},
		{`{"kind":"readTextFile","args":{"path":"rel"},"timeoutMs":1}`, "request.field_invalid", "args.path"},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":0}`, "request.field_invalid", "timeoutMs"},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":1.5}`, "request.field_invalid", "timeoutMs"},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":"5"}`, "request.field_invalid", "timeoutMs"},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":1,"cwd":"work"}`, "request.field_invalid", "cwd"},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":1,"shellEnv":{"A":1}}`, "request.field_invalid", "shellEnv"},
		{`{"kind":"exec","args":{"command":"x"},"timeoutMs":1,"contentB64":"eA=="}`, "request.field_invalid", "contentB64"},
		{`{"kind":"writeFile","args":{"path":"/f"},"timeoutMs":1,"contentB64":"eA"}`, "request.field_invalid", "contentB64"},
		{`{"kind":"writeFile","args":{"path":"/f","contentLen":1},"timeoutMs":1,"contentB64":"eA=="}`, "request.field_invalid", "args.contentLen"},
	}
	for _, c := range cases {
		wantError(t, post(fd.id, l.ownerKey, c.body), 400, c.code, c.mentions)
	}
	none[*protocol.Instruction](t, fd.barrier(), "an instruction for a refused request", nil)
}

// POST /v1/instructions/{id}/cancel: 202, idempotent; 404 for an unknown id
// or another user's instruction.
func TestHTTPCancel(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 1 })
	fd := l.enroll()
	fd.establish()
	_, otherKey := l.user("mallory")
	cancel := func(id, key string) int {
		t.Helper()
		return l.do("POST", "/v1/instructions/"+id+"/cancel", key, "").Status
	}
	running, _ := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"sleep 100"},"timeoutMs":100000}`)
	runID := running.next()["instructionId"].(string)
	fd.instructionFor(runID)
	queued, _ := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"later"},"timeoutMs":100000}`)
	queuedID := queued.next()["instructionId"].(string)

	if got := cancel(ids.New(ids.Instruction), l.ownerKey); got != 404 {
		t.Fatalf("unknown id: %d", got)
	}
	if got := cancel(runID, otherKey); got != 404 {
		t.Fatalf("another user's instruction: %d", got)
	}
	// A queued instruction: cancelled not_started at once, and again is still 202.
	for range 2 {
		if got := cancel(queuedID, l.ownerKey); got != 202 {
			t.Fatalf("cancel queued: %d", got)
		}
	}
	m := queued.next()
	if m["state"] != "terminal_never_started" || m["outcome"].(map[string]any)["state"] != "not_started" {
		t.Fatalf("queued outcome %v", m)
	}
	// A running one: the device is told, once per generation.
	for range 2 {
		if got := cancel(runID, l.ownerKey); got != 202 {
			t.Fatalf("cancel running: %d", got)
		}
	}
	fd.expectCancel(runID)
	none[*protocol.Cancel](t, fd.barrier(), "a second cancel", nil)
	fd.result(runID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
	if m := running.next(); m["state"] != "terminal" || m["outcome"].(map[string]any)["state"] != "killed" {
		t.Fatalf("running outcome %v", m)
	}
	// Settled: still 202 for its owner, still 404 for anyone else.
	if got := cancel(runID, l.ownerKey); got != 202 {
		t.Fatalf("cancel after settlement: %d", got)
	}
	if got := cancel(runID, otherKey); got != 404 {
		t.Fatalf("another user after settlement: %d", got)
	}
}

// A client that goes away cancels its instruction: nobody would see it.
func TestHTTPClientGoneCancels(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	s, _ := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"sleep 100"},"timeoutMs":100000}`)
	id := s.next()["instructionId"].(string)
	fd.instructionFor(id)
	s.resp.Body.Close()
	fd.expectCancel(id)
}
