package executor_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/protocol"
)

// Containment is on by default (§6.6): without Ops.AllowedRoots
// the runtime serves its workspace and its temp kinds' directory only, and
// never its own status file or process records.
func TestRuntimeContainsByDefault(t *testing.T) {
	tmp := t.TempDir()
	h := newHarness(t, func(c *executor.Config) { c.Ops.TempDir = tmp })
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	writeFileOS(t, outside, "outside")
	writeFileOS(t, filepath.Join(h.ws, "in.txt"), "in")
	writeFileOS(t, filepath.Join(tmp, "tmp.txt"), "tmp")
	h.waitStatus(func(s executor.Status) bool { return s.Connected })
	procs := filepath.Join(filepath.Dir(h.status), "procs")
	if err := os.MkdirAll(procs, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, cse := range []struct {
		path, want string
	}{
		{filepath.Join(h.ws, "in.txt"), "read"},
		{filepath.Join(tmp, "tmp.txt"), "read"},
		{outside, "error:permission_denied"},
		{h.status, "error:permission_denied"},
		{procs, "error:permission_denied"},
	} {
		id := newID()
		c.Send(&protocol.Instruction{Gen: 1, InstructionID: id, RootSessionID: "ses_test", Kind: protocol.KindReadTextFile,
			Args: protocol.PathArgs{Path: cse.path}, TimeoutMs: 10000})
		r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := outcomeOf(t, r); got != cse.want {
			t.Errorf("readTextFile %s: %s, want %s", cse.path, got, cse.want)
		}
	}
}
