package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/journal"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// denyExecGate refuses every exec and lets the rest run: an approval
// device whose person denied commands.
type denyExecGate struct{}

func (denyExecGate) Run(_ context.Context, req ops.Request, run func(ops.Request) protocol.Outcome) protocol.Outcome {
	if req.Kind.IsExec() {
		return protocol.Fail(protocol.ErrPermissionDenied, "denied on the approval device")
	}
	return run(req)
}

// The journal gets a start and an end for each instruction, in that order,
// with the approval decision, the outcome, the exit code and the bytes the
// op sent — never the output itself.
func TestTheJournalRecordsEachInstructionWithItsApproval(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() }) // after the harness's runtime has stopped
	h := newHarness(t, func(c *executor.Config) { c.Gate = denyExecGate{}; c.Journal = j })
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	denied, read := newID(), newID()
	c.Send(execIn(1, denied, "echo should-not-run", 5000))
	c.Send(&protocol.Instruction{Gen: 1, InstructionID: read, RootSessionID: "s", Kind: protocol.KindExists,
		Args: protocol.PathArgs{Path: h.ws}, TimeoutMs: 5000})
	for _, id := range []string{denied, read} {
		if _, err := h.lane.Ledger.WaitResult(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	var ends map[string]journal.Record
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines, err := journal.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		ends = map[string]journal.Record{}
		starts := map[string]bool{}
		for _, l := range lines {
			switch l.Event {
			case journal.EventStart:
				starts[l.InstructionID] = true
			case journal.EventEnd:
				if !starts[l.InstructionID] {
					t.Fatalf("an end before its start: %+v", l.Record)
				}
				ends[l.InstructionID] = l.Record
			}
		}
		if len(ends) == 2 || time.Now().After(deadline) {
			if _, p := journal.Verify(lines); p != nil {
				t.Fatalf("the chain: %v", p)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := ends[denied]; d.Approval != "refused" || d.Outcome != string(protocol.ErrPermissionDenied) || d.Kind != "exec" || d.ExitCode != nil {
		t.Errorf("the denied exec: %+v", d)
	}
	if r := ends[read]; r.Approval != "allowed" || r.Outcome != "ok" || r.Kind != "exists" {
		t.Errorf("the allowed read: %+v", r)
	}
}
