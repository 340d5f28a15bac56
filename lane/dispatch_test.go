package lane

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

// §5.1: a device that is not connected settles at once,
// terminal_never_started target_unavailable — never a silent queue.
func TestDispatchTargetUnavailableWhenNotConnected(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	call := l.dispatch(fd, execInstr("x"))
	if !isSettled(call) {
		t.Fatal("a dispatch to a device that never connected was queued")
	}
	wantFailure(t, settled(t, call), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	// Between a drop and the reconnect too.
	fd.establish()
	fd.drop()
	wantFailure(t, settled(t, l.dispatch(fd, execInstr("y"))), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
}

// Refusals before anything is queued are errors.
func TestDispatchRefusals(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	if _, err := l.srv.Dispatch(t.Context(), ids.New(ids.Device), execInstr("x")); !errors.Is(err, ErrUnknownDevice) {
		t.Fatalf("unknown device: %v", err)
	}
	bad := []Instruction{
		{Kind: "teleport", Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Second},
		{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}},
		{Kind: protocol.KindExec, Args: protocol.PathArgs{Path: "/x"}, Timeout: time.Second},
		{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: "relative"}, Timeout: time.Second},
		{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: "/a/../b"}, Timeout: time.Second},
		{Kind: protocol.KindWriteFile, Args: protocol.PathArgs{Path: "/x"}, Content: []byte("x"), Timeout: time.Second},
		{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Content: []byte("x"), Timeout: time.Second},
		{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Cwd: "work", Timeout: time.Second},
	}
	for _, in := range bad {
		var invalid *InvalidInstructionError
		if _, err := l.srv.Dispatch(t.Context(), fd.id, in); !errors.As(err, &invalid) {
			t.Errorf("%+v: %v, want an InvalidInstructionError", in, err)
		}
	}
	none[*protocol.Instruction](t, fd.barrier(), "an instruction for a refused dispatch", nil)
}

// §3.2: a kind the device did not declare fails not_supported and is never
// dispatched.
func TestDispatchNotSupportedWithoutDispatch(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(protocol.KindExec)
	fd.establish()
	for _, in := range []Instruction{
		{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: "/etc/hosts"}, Timeout: time.Second},
		{Kind: protocol.KindWriteFileGuarded, Args: protocol.WriteArgs{Path: "/a", Expect: &protocol.Expect{CanonicalPath: "/a"}}, Content: []byte("x"), Timeout: time.Second},
		{Kind: protocol.KindStatBatch, Args: protocol.StatBatchArgs{Paths: []string{"/a"}}, Timeout: time.Second},
	} {
		call := l.dispatch(fd, in)
		f := wantFailure(t, settled(t, call), protocol.StateTerminalNeverStarted, protocol.ErrNotSupported)
		if !strings.Contains(f.Message, string(in.Kind)) {
			t.Fatalf("message %q", f.Message)
		}
	}
	none[*protocol.Instruction](t, fd.barrier(), "an undeclared kind", nil)
}

// §1.5 maxInflight: the fifth instruction waits for a slot.
func TestDispatchMaxInflightQueues(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	if ack := fd.establish(); ack.MaxInflight != 4 {
		t.Fatalf("helloAck.maxInflight %d, want 4", ack.MaxInflight)
	}
	var calls []*Call
	for i := range 5 {
		calls = append(calls, l.dispatch(fd, execInstr(strings.Repeat("x", i+1))))
	}
	for i, c := range calls[:4] {
		in := fd.instructionFor(c.ID)
		if in.IssuedSeq != int64(i+1) || in.Gen != fd.gen {
			t.Fatalf("instruction %d: issuedSeq %d gen %s", i, in.IssuedSeq, in.Gen)
		}
	}
	none[*protocol.Instruction](t, fd.barrier(), "a fifth instruction in flight", nil)
	if st := l.callState(calls[4]); st != protocol.StateQueued {
		t.Fatalf("the fifth is %s, want queued", st)
	}
	if p := l.srv.Presence(fd.id); p.Inflight != 4 {
		t.Fatalf("presence inflight %d", p.Inflight)
	}
	fd.answerExec(calls[2].ID, 0)
	if in := fd.instructionFor(calls[4].ID); in.IssuedSeq != 5 {
		t.Fatalf("issuedSeq %d, want 5", in.IssuedSeq)
	}
	// issuedSeq is per connection.
	fd.drop()
	fd.restart() // a new process: what was in flight is written off (R3), the slots are free
	fd.establish()
	next := l.dispatch(fd, execInstr("y"))
	if in := fd.instructionFor(next.ID); in.IssuedSeq != 1 {
		t.Fatalf("issuedSeq %d on a new connection, want 1", in.IssuedSeq)
	}
}

func TestDispatchMaxInflightIsConfigurable(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 2 })
	fd := l.enroll()
	if ack := fd.establish(); ack.MaxInflight != 2 {
		t.Fatalf("helloAck.maxInflight %d", ack.MaxInflight)
	}
	a, b, c := l.dispatch(fd, execInstr("a")), l.dispatch(fd, execInstr("b")), l.dispatch(fd, execInstr("c"))
	fd.instructionFor(a.ID)
	fd.instructionFor(b.ID)
	if l.callState(c) != protocol.StateQueued {
		t.Fatal("the third is not queued")
	}
}

// §2.3: the instruction frame carries what the caller gave, with an
// unguessable ins_<ULID> id.
func TestDispatchInstructionFrame(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, Instruction{
		Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "go test ./..."}, Cwd: "/home/u/work/repo",
		ShellEnv: map[string]string{"GOFLAGS": "-count=1"}, Timeout: 90 * time.Second, RootSessionID: "ses_1",
	})
	in := fd.instructionFor(call.ID)
	if !strings.HasPrefix(in.InstructionID, "ins_") || !protocol.ValidULID(strings.TrimPrefix(in.InstructionID, "ins_")) {
		t.Fatalf("instructionId %q", in.InstructionID)
	}
	if in.Kind != protocol.KindExec || in.Args.(protocol.CommandArgs).Command != "go test ./..." || in.Cwd != "/home/u/work/repo" ||
		in.ShellEnv["GOFLAGS"] != "-count=1" || in.TimeoutMs != 90000 || in.RootSessionID != "ses_1" {
		t.Fatalf("instruction %+v", in)
	}
}

// payloadOf reads the payload sub-sequence that follows a write-family
// instruction and checks it against §3.4: begin, chunks at ascending
// contiguous offsets of at most part bytes, commit; totalLen and sha256 on
// begin, commit and the args.
func payloadOf(t *testing.T, fd *fakeDevice, in *protocol.Instruction, part int) []byte {
	t.Helper()
	args := in.Args.(protocol.WriteArgs)
	var got []byte
	var begun bool
	for {
		f := fd.next()
		p, ok := f.(*protocol.Payload)
		if !ok {
			t.Fatalf("inside the payload of %s: %s", in.InstructionID, describe(f))
		}
		if p.InstructionID != in.InstructionID || p.Gen != in.Gen {
			t.Fatalf("payload for %s gen %s", p.InstructionID, p.Gen)
		}
		switch p.Part {
		case protocol.PartBegin:
			if begun || p.TotalLen != args.ContentLen || p.SHA256 != args.SHA256 {
				t.Fatalf("begin %+v for args %+v", p, args)
			}
			begun = true
		case protocol.PartChunk:
			if !begun || p.Offset != int64(len(got)) || len(p.Data) == 0 || len(p.Data) > part {
				t.Fatalf("chunk at offset %d of %d bytes after %d bytes", p.Offset, len(p.Data), len(got))
			}
			got = append(got, p.Data...)
		case protocol.PartCommit:
			if !begun || p.TotalLen != int64(len(got)) || p.SHA256 != protocol.Digest(sha256.Sum256(got)) || p.SHA256 != args.SHA256 {
				t.Fatalf("commit %+v after %d bytes", p, len(got))
			}
			return got
		}
	}
}

// §3.4: write-family content follows the instruction at once as payload
// begin / chunks of 256 KiB / commit.
func TestDispatchWritePayload(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(append(defaultSupports, protocol.KindWriteFileExclusive, protocol.KindWriteFileGuarded)...)
	fd.establish()
	for _, c := range []struct {
		kind protocol.InstructionKind
		size int
	}{
		{protocol.KindWriteFile, 600 << 10},
		{protocol.KindWriteFile, 512 << 10},
		{protocol.KindWriteFile, 0},
		{protocol.KindAppendFile, 1},
		{protocol.KindWriteFileExclusive, 300 << 10},
		{protocol.KindWriteFileGuarded, 10},
	} {
		content := make([]byte, c.size)
		rand.Read(content)
		args := protocol.WriteArgs{Path: "/home/u/work/f.bin"}
		if c.kind == protocol.KindWriteFileGuarded {
			args.Expect = &protocol.Expect{CanonicalPath: "/home/u/work/f.bin", FileID: "42"}
		}
		call := l.dispatch(fd, Instruction{Kind: c.kind, Args: args, Content: content, Timeout: time.Minute})
		in := fd.instructionFor(call.ID)
		wa := in.Args.(protocol.WriteArgs)
		if wa.ContentLen != int64(c.size) || wa.SHA256 != protocol.Digest(sha256.Sum256(content)) {
			t.Fatalf("%s of %d bytes: args %+v", c.kind, c.size, wa)
		}
		if got := payloadOf(t, fd, in, protocol.DefaultPayloadPartBytes); !bytes.Equal(got, content) {
			t.Fatalf("%s of %d bytes: the payload carried %d different bytes", c.kind, c.size, len(got))
		}
		var o protocol.Outcome = protocol.WriteOutcome{CanonicalPath: "/home/u/work/f.bin"}
		if c.kind == protocol.KindAppendFile {
			o = protocol.VoidOutcome{}
		}
		fd.result(call.ID, 0, o)
		fd.expectResultAck(call.ID)
		if s := settled(t, call); !s.Outcome.OK() {
			t.Fatalf("%s settled %+v", c.kind, s)
		}
	}
}

func TestDispatchPayloadPartBytesIsConfigurable(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.PayloadPartBytes = 1000 })
	fd := l.enroll()
	fd.establish()
	content := bytes.Repeat([]byte("0123456789"), 250)
	call := l.dispatch(fd, Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"}, Content: content, Timeout: time.Minute})
	if got := payloadOf(t, fd, fd.instructionFor(call.ID), 1000); !bytes.Equal(got, content) {
		t.Fatal("payload mismatch")
	}
}

// §3.2: a device that gained a protective write face since the task's
// environment was built has its ordinary writes refused, without dispatch.
func TestDispatchProtectiveFacesGainedMidTask(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(append(defaultSupports, protocol.KindWriteFileGuarded, protocol.KindWriteFileExclusive)...)
	fd.establish()
	ordinary := func(kind protocol.InstructionKind, env []protocol.InstructionKind) *Call {
		return l.dispatch(fd, Instruction{Kind: kind, Args: protocol.WriteArgs{Path: "/w/f"}, Content: []byte("x"), Timeout: time.Minute, EnvironmentSupports: env})
	}
	before := []protocol.InstructionKind{protocol.KindExec, protocol.KindWriteFile, protocol.KindAppendFile, protocol.KindWriteFileExclusive}
	for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindAppendFile} {
		f := wantFailure(t, settled(t, ordinary(kind, before)), protocol.StateTerminalNeverStarted, protocol.ErrNotSupported)
		if !strings.Contains(f.Message, string(protocol.KindWriteFileGuarded)) {
			t.Fatalf("message %q does not name the gained face", f.Message)
		}
	}
	none[*protocol.Instruction](t, fd.barrier(), "an ordinary write after a gained face", nil)
	// Environments that already had both faces, or make no claim, dispatch.
	both := append(before, protocol.KindWriteFileGuarded)
	for _, env := range [][]protocol.InstructionKind{both, nil} {
		call := ordinary(protocol.KindWriteFile, env)
		payloadOf(t, fd, fd.instructionFor(call.ID), protocol.DefaultPayloadPartBytes)
	}
	// Losing a face is not the hazard.
	plain := l.enroll()
	plain.establish()
	call, err := l.srv.Dispatch(t.Context(), plain.id, Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/w/f"}, Content: []byte("x"), Timeout: time.Minute, EnvironmentSupports: both})
	if err != nil {
		t.Fatal(err)
	}
	plain.instructionFor(call.ID)
}

// ndjsonStream is one POST /v1/devices/{id}/instructions response, read line
// by line as the lane flushes it.
type ndjsonStream struct {
	t     testing.TB
	resp  *http.Response
	lines chan map[string]any
}

func (l *wsLane) postInstruction(deviceID, apiKey, body string) (*ndjsonStream, response) {
	l.t.Helper()
	req, err := http.NewRequestWithContext(l.t.Context(), "POST", l.url+"/v1/devices/"+deviceID+"/instructions", strings.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return nil, response{resp.StatusCode, resp.Header, b.Bytes()}
	}
	s := &ndjsonStream{t: l.t, resp: resp, lines: make(chan map[string]any, 64)}
	l.t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"invalid": sc.Text()}
			}
			s.lines <- m
		}
	}()
	return s, response{status: 200, header: resp.Header}
}

func (s *ndjsonStream) next() map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.lines:
		if !ok {
			s.t.Fatal("the NDJSON stream ended")
		}
		return m
	case <-time.After(waitBound):
		s.t.Fatal("no NDJSON line within the wait bound")
	}
	return nil
}

func (s *ndjsonStream) end() {
	s.t.Helper()
	select {
	case m, ok := <-s.lines:
		if ok {
			s.t.Fatalf("a line after the outcome: %v", m)
		}
	case <-time.After(waitBound):
		s.t.Fatal("the stream did not end after the outcome")
	}
}

// The HTTP instruction API end to end: accepted, chunks in order as they
// are accepted, then the outcome, each line flushed as it happens.
func TestHTTPInstructionsEndToEnd(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	s, r := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"echo hi"},"cwd":"/home/u/work","shellEnv":{"A":"1"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
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
		t.Fatalf("writeFileGuarded: status %d %s", r.status, r.body)
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
		t.Fatalf("status %d %s", r.status, r.body)
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
	if r := post(fd.id, "", ok); r.status != 403 {
		t.Fatalf("no credential: %d", r.status)
	}
	cases := []struct{ body, code, mentions string }{
		{`{"kind":"exec"`, "request.invalid_json", "JSON"},
		{`[]`, "request.body_shape", "object"},
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
		return l.do("POST", "/v1/instructions/"+id+"/cancel", key, "").status
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
