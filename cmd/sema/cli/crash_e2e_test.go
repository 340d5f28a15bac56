package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// An executor that restarts (a new epoch) while work is in flight: the lane
// reports that work outcome_unknown and never runs it again.
func TestRestartNewEpochOutcomeUnknown(t *testing.T) {
	s := startServer(t, t.TempDir())
	dir := t.TempDir() // outside the workspace: the command needs it writable
	stateDir, id, serve := enrollAndServe(t, s, t.TempDir(), "--allow-path", dir)
	gate, marker := filepath.Join(dir, "gate"), filepath.Join(dir, "runs")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) }) // the orphaned command ends
	// A SIGKILLed executor cannot kill its command: the command itself also
	// ends when the test's directory is removed, so it never outlives the test.
	run := startProc(t, s.env(t), nil, "run", "--device", id, "--",
		fmt.Sprintf("echo run >> %s; echo started $$; while [ ! -e %s ] && [ -d %s ]; do sleep 0.01; done", marker, gate, dir))
	var pid int
	waitFor(t, "the command to start", func() bool {
		_, err := fmt.Sscanf(run.stdout.String(), "started %d", &pid)
		return err == nil && pid > 0
	})
	serve.cmd.Process.Kill()
	serve.wait(t)
	if !alive(pid) {
		t.Fatal("the command died with the executor; this test needs it orphaned")
	}
	again := startServe(t, stateDir)
	// The new process kills what the dead one left running, before its hello.
	waitFor(t, "the orphaned command to be killed", func() bool { return !alive(pid) })
	if code := run.wait(t); code != cli.ExitLaneFailure || !strings.Contains(run.stderr.String(), "outcome_unknown") ||
		!strings.Contains(run.stderr.String(), "new epoch") {
		t.Fatalf("run: exit %d: %s", code, run.stderr)
	}
	waitFor(t, "the device online again", func() bool { return s.online(t, id) })
	if b, _ := os.ReadFile(marker); string(b) != "run\n" {
		t.Fatalf("the command ran %q", b)
	}
	// and the lane takes new work from the new process.
	if out, errOut, code := s.sema(t, nil, "run", "--", "echo after"); code != 0 || out != "after\n" {
		t.Fatalf("run after restart: exit %d %q %s", code, out, errOut)
	}
	again.cmd.Process.Signal(syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// An executor killed while a write's payload arrives leaves its staging
// file beside the target; the next serve removes it before its hello, so
// the directory ends as it was: no half-written file (§3.4), and the put is
// never written by the new process (§5.4).
func TestCrashMidPutLeavesNoHalfWrittenFile(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	stateDir, id, serve := enrollAndServe(t, s, ws)
	src := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(src, bytes.Repeat([]byte("0123456789abcdef"), 8<<20), 0o600); err != nil { // 128 MiB
		t.Fatal(err)
	}
	put := startProc(t, s.env(t), nil, "fs", "put", "--device", id, src, "big")
	waitFor(t, "the staging file", func() bool { return len(stagingFiles(t, ws)) > 0 })
	serve.cmd.Process.Kill()
	serve.wait(t)
	if left := stagingFiles(t, ws); len(left) == 0 {
		t.Skip("the put finished before the executor was killed")
	}
	again := startServe(t, stateDir)
	if code := put.wait(t); code != cli.ExitLaneFailure || !strings.Contains(put.stderr.String(), "outcome_unknown") {
		t.Fatalf("put: exit %d: %s", code, put.stderr)
	}
	waitFor(t, "the device online again", func() bool { return s.online(t, id) })
	if left := stagingFiles(t, ws); len(left) != 0 {
		t.Errorf("staging files left beside the target: %v", left)
	}
	if _, err := os.Lstat(filepath.Join(ws, "big")); !os.IsNotExist(err) {
		t.Errorf("the target exists after a put that never committed: %v", err)
	}
	again.cmd.Process.Signal(syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// stagingFiles lists the write staging files (.NAME.sema-HEX.tmp) in dir.
func stagingFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.sema-*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
