package executor_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// cancel (R11): the running command's group is killed and the answer is
// cancelled killed; a repeated cancel is a no-op; a cancel for an id never
// received answers not_started.
func TestCancelKillsAndIsIdempotent(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	id := newID()
	c.Send(execIn(1, id, "echo $$; exec sleep 1000", 60000))
	pid := h.pidOf(id)
	c.Send(&protocol.Cancel{Gen: 1, InstructionID: id})
	c.Send(&protocol.Cancel{Gen: 1, InstructionID: id})
	r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "cancelled:killed" {
		t.Fatalf("outcome %s", outcomeOf(t, r))
	}
	if alive(pid) {
		t.Errorf("pid %d alive after its cancel was answered", pid)
	}
	never := newID()
	c.Send(&protocol.Cancel{Gen: 1, InstructionID: never})
	r2, err := h.lane.Ledger.WaitResult(h.ctx(), never)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r2) != "cancelled:not_started" {
		t.Errorf("cancel of a never-received id: %s", outcomeOf(t, r2))
	}
	// One more cancel for the finished one, and an instruction with the
	// cancelled id afterwards: neither runs nor answers twice.
	c.Send(&protocol.Cancel{Gen: 1, InstructionID: id})
	marker := filepath.Join(t.TempDir(), "ran")
	c.Send(execIn(1, never, "touch "+marker, 0))
	done := newID()
	c.Send(execIn(1, done, "true", 0))
	if _, err := h.lane.Ledger.WaitResult(h.ctx(), done); err != nil {
		t.Fatal(err)
	}
	if n := len(h.lane.Ledger.Stream(id).Results); n != 1 {
		t.Errorf("%d results for the cancelled instruction", n)
	}
	if n := len(h.lane.Ledger.Stream(never).Results); n != 1 {
		t.Errorf("%d results for the never-received instruction", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("an instruction id that was already answered ran")
	}
}

// At most once: an instruction id that arrives twice runs once.
func TestDuplicateInstructionRunsOnce(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	marker := filepath.Join(t.TempDir(), "count")
	id := newID()
	c.Send(execIn(1, id, "echo x >> "+marker, 0))
	c.Send(execIn(1, id, "echo x >> "+marker, 0))
	if _, err := h.lane.Ledger.WaitResult(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.waitOutboxEmpty()
	// Even after its result was released.
	c.Send(execIn(1, id, "echo x >> "+marker, 0))
	last := newID()
	c.Send(execIn(1, last, "true", 0))
	if _, err := h.lane.Ledger.WaitResult(h.ctx(), last); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, marker); got != "x\n" {
		t.Errorf("ran %d times", strings.Count(got, "x"))
	}
	if n := len(h.lane.Ledger.Stream(id).Results); n != 1 {
		t.Errorf("%d results", n)
	}
}

// Instructions that must not run are answered, never dropped: an undeclared
// kind, an unknown kind, invalid args, another generation.
func TestInstructionsThatCannotRunAreAnswered(t *testing.T) {
	h := newHarness(t)
	c := h.connect(3, nil, nil)
	c.AutoAck(true)
	cases := []struct {
		name string
		send func(id string)
		want string
	}{
		{"statBatch (declared by the spec, not by this executor)", func(id string) {
			c.Send(&protocol.Instruction{Gen: 3, InstructionID: id, Kind: protocol.KindStatBatch, Args: protocol.StatBatchArgs{Paths: []string{"/"}}, TimeoutMs: 1000})
		}, "error:not_supported"},
		{"writeFileGuarded (not atomic here, so not declared)", func(id string) {
			c.Send(&protocol.Instruction{Gen: 3, InstructionID: id, Kind: protocol.KindWriteFileGuarded,
				Args: protocol.WriteArgs{Path: "/tmp/x", Expect: &protocol.Expect{CanonicalPath: "/tmp/x"}}, TimeoutMs: 1000})
		}, "error:not_supported"},
		{"an unknown kind", func(id string) {
			c.SendRaw(fmt.Appendf(nil, `{"t":"instruction","gen":"3","instructionId":%q,"rootSessionId":"s","issuedSeq":1,"kind":"teleport","args":{},"timeoutMs":1000}`, id))
		}, "error:not_supported"},
		{"a relative path", func(id string) {
			c.SendRaw(fmt.Appendf(nil, `{"t":"instruction","gen":"3","instructionId":%q,"rootSessionId":"s","issuedSeq":1,"kind":"exists","args":{"path":"rel/x"},"timeoutMs":1000}`, id))
		}, "error:invalid"},
		{"another generation", func(id string) { c.Send(execIn(2, id, "true", 0)) }, "error:invalid"},
	}
	for _, tc := range cases {
		id := newID()
		tc.send(id)
		r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := outcomeOf(t, r); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// Heartbeats every H with an increasing seq and the true inflight list
// (R14); ping is accepted and ignored.
func TestHeartbeatAndPing(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	g := newGate(t)
	id := newID()
	c.Send(execIn(1, id, "echo $$; "+g.wait(), 0))
	h.pidOf(id)
	c.Send(&protocol.Ping{})
	beat := func(n int) *protocol.Heartbeat {
		t.Helper()
		h.clock.WaitTimer(h.ctx(), func(d time.Duration) bool { return d == hbMs*time.Millisecond })
		h.clock.Advance(hbMs * time.Millisecond)
		seen := 0
		f, err := c.WaitFrame(h.ctx(), func(f protocol.DeviceFrame) bool {
			if _, ok := f.(*protocol.Heartbeat); ok {
				seen++
				return seen == n
			}
			return false
		})
		if err != nil {
			t.Fatal(err)
		}
		return f.(*protocol.Heartbeat)
	}
	b1 := beat(1)
	if b1.Seq != 0 || b1.Gen != 1 || len(b1.Inflight) != 1 || b1.Inflight[0] != id {
		t.Errorf("first heartbeat %+v", b1)
	}
	st := h.waitStatus(func(s executor.Status) bool { return len(s.Inflight) == 1 })
	if st.Inflight[0] != id {
		t.Errorf("status inflight %v", st.Inflight)
	}
	g.open(t)
	if _, err := h.lane.Ledger.WaitResult(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	b2 := beat(2)
	if b2.Seq != 1 || len(b2.Inflight) != 0 {
		t.Errorf("second heartbeat %+v", b2)
	}
}

// stuckGate holds every instruction, ignoring its context, until the test
// ends: an op that never answers, so only a backstop can.
type stuckGate struct {
	entered chan struct{}
	release chan struct{}
}

func (g stuckGate) Run(context.Context, ops.Request, func(ops.Request) protocol.Outcome) protocol.Outcome {
	g.entered <- struct{}{}
	<-g.release
	return protocol.Fail(protocol.ErrAborted, "released")
}

// The backstops (R11, R12): an instruction whose op does not answer is
// answered outcome_unknown once its timeout plus TimeoutBackstop, or the
// CancelAnswerBudget after a cancel, has passed. They are AfterFunc timers,
// fired by the fake clock inside Advance.
func TestBackstopsAnswerAnOpThatNeverDoes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeoutMs int64
		cancel    bool
		timer     time.Duration
	}{
		{"timeout", 1000, false, time.Second + time.Hour}, // the harness's TimeoutBackstop
		{"cancel", 0, true, 9 * time.Second},              // the default CancelAnswerBudget
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := stuckGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
			h := newHarness(t, func(c *executor.Config) { c.Gate = g })
			t.Cleanup(func() { close(g.release) }) // before the harness stops the runtime
			c := h.connect(1, nil, nil)
			c.AutoAck(true)
			id := newID()
			c.Send(execIn(1, id, "true", tc.timeoutMs))
			<-g.entered
			if tc.cancel {
				c.Send(&protocol.Cancel{Gen: 1, InstructionID: id})
			}
			backstop := func(d time.Duration) bool { return d == tc.timer }
			if _, ok := h.clock.WaitTimer(h.ctx(), backstop); !ok {
				t.Fatalf("no backstop of %v was armed", tc.timer)
			}
			h.clock.Advance(tc.timer - time.Millisecond)
			if _, ok := h.clock.WaitTimer(h.ctx(), backstop); !ok {
				t.Fatal("the backstop fired early")
			}
			h.clock.Advance(time.Millisecond)
			r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
			if err != nil {
				t.Fatal(err)
			}
			if outcomeOf(t, r) != "error:outcome_unknown" {
				t.Errorf("outcome %s", outcomeOf(t, r))
			}
		})
	}
}

// A write's payload frames reach its op in order (§3.4).
func TestPayloadIsRoutedToTheWrite(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	content := []byte(strings.Repeat("payload bytes\n", 50000)) // 700 KB: three parts
	sum := protocol.Digest(sha256.Sum256(content))
	path := filepath.Join(h.ws, "out.txt")
	id := newID()
	c.Send(&protocol.Instruction{Gen: 1, InstructionID: id, RootSessionID: "s", Kind: protocol.KindWriteFile,
		Args: protocol.WriteArgs{Path: path, ContentLen: int64(len(content)), SHA256: sum}, TimeoutMs: 10000})
	c.Send(&protocol.Payload{Gen: 1, InstructionID: id, Part: protocol.PartBegin, TotalLen: int64(len(content)), SHA256: sum})
	for off := 0; off < len(content); off += protocol.DefaultPayloadPartBytes {
		end := min(off+protocol.DefaultPayloadPartBytes, len(content))
		c.Send(&protocol.Payload{Gen: 1, InstructionID: id, Part: protocol.PartChunk, Offset: int64(off), Data: content[off:end]})
	}
	c.Send(&protocol.Payload{Gen: 1, InstructionID: id, Part: protocol.PartCommit, TotalLen: int64(len(content)), SHA256: sum})
	r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "write" {
		t.Fatalf("outcome %+v", r.Outcome)
	}
	if got := readFile(t, path); got != string(content) {
		t.Errorf("file holds %d bytes, want %d", len(got), len(content))
	}
}

// A write whose payload is cut by a dropped socket fails (the rest will
// never come, R1), and leaves no file.
func TestPayloadCutByADropFailsTheWrite(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	content := []byte("0123456789")
	sum := protocol.Digest(sha256.Sum256(content))
	path := filepath.Join(h.ws, "cut.txt")
	id := newID()
	c.Send(&protocol.Instruction{Gen: 1, InstructionID: id, RootSessionID: "s", Kind: protocol.KindWriteFile,
		Args: protocol.WriteArgs{Path: path, ContentLen: 10, SHA256: sum}, TimeoutMs: 10000})
	c.Send(&protocol.Payload{Gen: 1, InstructionID: id, Part: protocol.PartBegin, TotalLen: 10, SHA256: sum})
	c.Send(&protocol.Payload{Gen: 1, InstructionID: id, Part: protocol.PartChunk, Offset: 0, Data: content[:4]})
	c2 := h.reconnect(c, 2, []string{id}, nil)
	c2.AutoAck(true)
	r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomeOf(t, r); !strings.HasPrefix(got, "error:") {
		t.Fatalf("outcome %s", got)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a half-sent write left a file")
	}
}
