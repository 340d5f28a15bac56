package lane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlstore"
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
	return l.postInstructionFrom(deviceID, apiKey, strings.NewReader(body))
}

// postInstructionFrom posts a body read from r: with Content-Length for a
// *strings.Reader or *bytes.Reader, chunked for any other reader.
func (l *wsLane) postInstructionFrom(deviceID, apiKey string, body io.Reader) (*ndjsonStream, response) {
	l.t.Helper()
	req, err := http.NewRequestWithContext(l.t.Context(), "POST", l.url+"/v1/devices/"+deviceID+"/instructions", body)
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
		return nil, response{Status: resp.StatusCode, Header: resp.Header, Body: b.Bytes()}
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
	return s, response{Status: 200, Header: resp.Header}
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

// deviceReads counts the registry's device reads.
type deviceReads struct {
	*sqlstore.Store
	n atomic.Int64
}

func (d *deviceReads) Device(ctx context.Context, id string) (store.Device, error) {
	d.n.Add(1)
	return d.Store.Device(ctx, id)
}

// A registry this process serves alone counts its device revocations. While
// the count stands, a dispatch to a device attached here reads no row; once
// the device is revoked, even behind the lane's back (an embedder calling its
// store), the next dispatch reads the row again and refuses.
func TestDispatchReadsTheDeviceRowAgainAfterARevocation(t *testing.T) {
	var reads *deviceReads
	l := newWSLane(t, func(c *Config) {
		reads = &deviceReads{Store: c.Store.(*sqlstore.Store)}
		c.Store = reads
	})
	fd := l.enroll()
	fd.establish()
	before := reads.n.Load()
	call := l.dispatch(fd, execInstr("a"))
	fd.instructionFor(call.ID)
	if n := reads.n.Load() - before; n != 0 {
		t.Fatalf("a dispatch to an attached device read its row %d times", n)
	}
	if _, err := l.store.RevokeDevice(t.Context(), l.owner.ID, fd.id); err != nil {
		t.Fatal(err)
	}
	next := l.dispatch(fd, execInstr("b"))
	wantFailure(t, settled(t, next), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	if reads.n.Load() == before {
		t.Fatal("the dispatch after a revocation did not read the row")
	}
}
