package ops

import (
	"context"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor/sandbox"
	"github.com/sema-agent/sema/protocol"
)

// sandboxEnv is testEnv with a sandbox that follows process trees (mode
// off: only the tree is followed), or a skip where the kernel cannot.
func sandboxEnv(t *testing.T, mode sandbox.Mode) *Env {
	t.Helper()
	env := testEnv(t)
	p, err := sandbox.NewPolicy(sandbox.Options{Mode: mode, Workspace: env.WorkspaceRoot, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if env.Sandbox, err = sandbox.New(p); err != nil {
		t.Skipf("no sandbox on this kernel: %v", err)
	}
	if len(env.Sandbox.Notes()) > 0 {
		t.Skipf("this kernel cannot follow process trees: %v", env.Sandbox.Notes())
	}
	return env
}

// Commands whose descendant leaves the process group: a setsid sleeper
// the shell waits for, and a double fork whose middle process exits.
var escapingCommands = map[string]string{
	"setsid":      "setsid sleep 30 & echo PIDS $$ $!; sleep 30",
	"double fork": "(setsid sh -c 'sleep 30 & echo PIDS $$ $!' &); sleep 30",
}

// Nothing a command starts outlives its instruction, setsid or not: on a
// timeout and on a cancel the whole tree is killed, not only the group.
func TestExecUnderASandboxKillsTheWholeTree(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.WorkspaceWrite} {
		for name, command := range escapingCommands {
			t.Run(string(mode)+"/"+name+"/timeout", func(t *testing.T) {
				req := cmdReq(command)
				req.Timeout = time.Second
				s := newTestSink(t)
				wantFailure(t, run(t, context.Background(), sandboxEnv(t, mode), req, s), protocol.ErrTimeout, "killed")
				wantDescendantDead(t, s)
			})
			t.Run(string(mode)+"/"+name+"/cancel", func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				s := newTestSink(t)
				onPIDs(s, func() { cancel(ErrCancelled) })
				out := run(t, ctx, sandboxEnv(t, mode), cmdReq(command), s)
				if out != (protocol.CancelledOutcome{State: protocol.CancelKilled}) {
					t.Fatalf("outcome %#v, want cancelled killed", out)
				}
				wantDescendantDead(t, s)
			})
		}
	}
}

// A shell that exits on its own leaves a setsid'd daemon behind: the exec
// answers the shell's exit code, and the daemon is gone.
func TestExecUnderASandboxKillsWhatTheShellLeft(t *testing.T) {
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), sandboxEnv(t, sandbox.WorkspaceWrite),
		cmdReq("(setsid sh -c 'sleep 30 </dev/null >/dev/null 2>&1 & echo PIDS $$ $!' &); sleep 0.2; exit 3"), s), 3)
	wantDescendantDead(t, s)
}

func wantDescendantDead(t *testing.T, s *testSink) {
	t.Helper()
	p := pids(t, s)
	if procAlive(p.pid) {
		t.Fatalf("the descendant %d that left the group outlived its instruction", p.pid)
	}
}
