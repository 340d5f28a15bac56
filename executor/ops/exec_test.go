//go:build linux

package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

func TestExecEcho(t *testing.T) {
	s := newTestSink(t)
	out := run(t, context.Background(), testEnv(t), cmdReq("echo to-stdout; echo to-stderr >&2"), s)
	eo := wantExec(t, out, 0)
	if eo.Truncated != nil {
		t.Errorf("truncated %+v, want nil", eo.Truncated)
	}
	if got := s.stdout(); got != "to-stdout\n" {
		t.Errorf("stdout %q", got)
	}
	if got := s.stderr(); got != "to-stderr\n" {
		t.Errorf("stderr %q", got)
	}
}

func TestExecStreamKind(t *testing.T) {
	req := cmdReq("printf streamed")
	req.Kind = protocol.KindExecStream
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), req, s), 0)
	if s.stdout() != "streamed" {
		t.Errorf("stdout %q", s.stdout())
	}
}

func TestExecNoOutput(t *testing.T) {
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), cmdReq("true"), s), 0)
	if s.chunks[protocol.ChunkStdout]+s.chunks[protocol.ChunkStderr] != 0 {
		t.Errorf("chunks for a silent command: %v", s.chunks)
	}
}

func TestExecExitCodes(t *testing.T) {
	for _, tc := range []struct {
		command string
		code    int
	}{
		{"exit 0", 0},
		{"exit 1", 1},
		{"exit 42", 42},
		{"false", 1},
		{"kill -9 $$", 128 + 9},
		{"kill -TERM $$", 128 + 15},
		{"no-such-command-sema-test 2>/dev/null", 127},
	} {
		t.Run(tc.command, func(t *testing.T) {
			wantExec(t, run(t, context.Background(), testEnv(t), cmdReq(tc.command), nil), tc.code)
		})
	}
}

func TestExecShellEnv(t *testing.T) {
	t.Setenv("EXEC_TEST_BASE", "base")
	t.Setenv("EXEC_TEST_OVER", "old")
	os.Unsetenv("EXEC_TEST_ADDED")
	req := cmdReq(`printf '%s|%s|%s|' "$EXEC_TEST_BASE" "$EXEC_TEST_OVER" "$EXEC_TEST_ADDED"; env | grep -c '^EXEC_TEST_OVER='`)
	req.ShellEnv = map[string]string{"EXEC_TEST_OVER": "new", "EXEC_TEST_ADDED": "added value"}
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), req, s), 0)
	if got, want := s.stdout(), "base|new|added value|1\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if v, ok := os.LookupEnv("EXEC_TEST_ADDED"); ok {
		t.Errorf("shellEnv leaked into the executor: EXEC_TEST_ADDED=%q", v)
	}
	if v := os.Getenv("EXEC_TEST_OVER"); v != "old" {
		t.Errorf("shellEnv changed the executor's EXEC_TEST_OVER to %q", v)
	}
}

// A command gets the executor's environment less every SEMA_ variable: the
// API key and the state dir never reach it, in any mode; shellEnv still
// reaches it whatever its names.
func TestExecNeverPassesTheExecutorsOwnVariables(t *testing.T) {
	t.Setenv("SEMA_API_KEY", "sk_secret")
	t.Setenv("SEMA_STATE_DIR", "/secret/state")
	t.Setenv("EXEC_TEST_KEPT", "kept")
	req := cmdReq(`env | grep -c '^SEMA_'; printf '%s|%s\n' "$EXEC_TEST_KEPT" "$SEMA_FROM_SHELLENV"`)
	req.ShellEnv = map[string]string{"SEMA_FROM_SHELLENV": "given"}
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), req, s), 0)
	if got, want := s.stdout(), "1\nkept|given\n"; got != want {
		t.Errorf("stdout %q, want %q (only shellEnv's SEMA_ variable)", got, want)
	}
}

func TestExecShellEnvInvalid(t *testing.T) {
	for _, name := range []string{"", "A=B", "A\x00B"} {
		req := cmdReq("true")
		req.ShellEnv = map[string]string{name: "x"}
		wantFailure(t, run(t, context.Background(), testEnv(t), req, nil), protocol.ErrInvalid, "shellEnv")
	}
	req := cmdReq("true")
	req.ShellEnv = map[string]string{"OK": "a\x00b"}
	wantFailure(t, run(t, context.Background(), testEnv(t), req, nil), protocol.ErrInvalid, "OK")
}

func TestExecCwd(t *testing.T) {
	env := testEnv(t)
	root, err := filepath.EvalSymlinks(env.WorkspaceRoot)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), env, cmdReq("pwd -P"), s), 0)
	if got := strings.TrimSpace(s.stdout()); got != root {
		t.Errorf("without cwd the command ran in %q, want the workspace root %q", got, root)
	}

	other := t.TempDir()
	otherReal, _ := filepath.EvalSymlinks(other)
	req := cmdReq("pwd -P")
	req.Cwd = other
	s = newTestSink(t)
	wantExec(t, run(t, context.Background(), env, req, s), 0)
	if got := strings.TrimSpace(s.stdout()); got != otherReal {
		t.Errorf("with cwd %q the command ran in %q", other, got)
	}
}

func TestExecCwdMissing(t *testing.T) {
	env := testEnv(t)
	marker := filepath.Join(env.WorkspaceRoot, "ran")
	req := cmdReq("touch " + marker)
	req.Cwd = filepath.Join(env.WorkspaceRoot, "no", "such", "dir")
	wantFailure(t, run(t, context.Background(), env, req, nil), protocol.ErrNotFound, req.Cwd, "never started")
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although its cwd is missing")
	}

	file := filepath.Join(env.WorkspaceRoot, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	req.Cwd = file
	wantFailure(t, run(t, context.Background(), env, req, nil), protocol.ErrNotDirectory, file)

	noRoot := &Env{}
	wantFailure(t, run(t, context.Background(), noRoot, cmdReq("true"), nil), protocol.ErrInvalid, "workspace root")
}

func TestExecShellUnavailable(t *testing.T) {
	env := testEnv(t)
	marker := filepath.Join(env.WorkspaceRoot, "ran")
	env.Shell = filepath.Join(t.TempDir(), "missing-sh")
	wantFailure(t, run(t, context.Background(), env, cmdReq("touch "+marker), nil),
		protocol.ErrShellUnavailable, env.Shell, "never started")

	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.Shell = notExec
	wantFailure(t, run(t, context.Background(), env, cmdReq("touch "+marker), nil), protocol.ErrShellUnavailable, notExec)

	env.Shell = "sema-no-such-shell-on-path"
	wantFailure(t, run(t, context.Background(), env, cmdReq("true"), nil), protocol.ErrShellUnavailable, env.Shell)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran without a shell")
	}
}

func TestExecShellByName(t *testing.T) {
	env := testEnv(t)
	env.Shell = "sh" // resolved on PATH
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), env, cmdReq("echo ok"), s), 0)
	if s.stdout() != "ok\n" {
		t.Errorf("stdout %q", s.stdout())
	}
}

func TestExecBadRequest(t *testing.T) {
	req := cmdReq("true")
	req.Args = protocol.PathArgs{Path: "/"}
	wantFailure(t, run(t, context.Background(), testEnv(t), req, nil), protocol.ErrInvalid)
	req = cmdReq("echo a\x00b")
	wantFailure(t, run(t, context.Background(), testEnv(t), req, nil), protocol.ErrInvalid, "NUL")
}

func TestExecStdinIsDevNull(t *testing.T) {
	s := newTestSink(t)
	// cat returns at once on /dev/null; on an inherited terminal or pipe it
	// would wait.
	wantExec(t, run(t, context.Background(), testEnv(t), cmdReq("cat; readlink /proc/$$/fd/0"), s), 0)
	if got := s.stdout(); got != os.DevNull+"\n" {
		t.Errorf("stdin is %q, want %s", got, os.DevNull)
	}
}

func TestExecOwnProcessGroup(t *testing.T) {
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), cmdReq("echo $$; ps -o pgid= -p $$ 2>/dev/null || cut -d' ' -f5 /proc/$$/stat"), s), 0)
	f := strings.Fields(s.stdout())
	if len(f) != 2 || f[0] != f[1] {
		t.Errorf("pid and pgid %q: the shell is not the leader of its own group", f)
	}
	if f[1] == strconv.Itoa(syscall.Getpgrp()) {
		t.Errorf("the shell is in the executor's process group")
	}
}

// TestExecLargeOutput sends 100 MiB and checks it arrives complete; the sink
// checks every chunk's size.
func TestExecLargeOutput(t *testing.T) {
	const size = 100 << 20
	s := newTestSink(t)
	s.keep = false
	zero := make([]byte, MaxChunkBytes)
	var nonZero atomic.Bool
	s.onData = func(_ protocol.ChunkKind, p []byte) error {
		if !bytes.Equal(p, zero[:len(p)]) {
			nonZero.Store(true)
		}
		return nil
	}
	eo := wantExec(t, run(t, context.Background(), testEnv(t), cmdReq(fmt.Sprintf("head -c %d /dev/zero", size)), s), 0)
	if eo.Truncated != nil {
		t.Errorf("truncated %+v", eo.Truncated)
	}
	if s.n[protocol.ChunkStdout] != size {
		t.Errorf("got %d bytes, want %d", s.n[protocol.ChunkStdout], size)
	}
	if nonZero.Load() {
		t.Errorf("the stream from /dev/zero carried a non-zero byte")
	}
	if s.chunks[protocol.ChunkStdout] < size/MaxChunkBytes {
		t.Errorf("%d chunks for %d bytes", s.chunks[protocol.ChunkStdout], size)
	}
}

// TestExecOrder checks both streams, written at once, arrive complete and in
// order, by digest.
func TestExecOrder(t *testing.T) {
	const n = 400000
	var want bytes.Buffer
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	wantSum := sha256.Sum256(want.Bytes())
	s := newTestSink(t)
	s.keep = false
	wantExec(t, run(t, context.Background(), testEnv(t), cmdReq(fmt.Sprintf("seq 1 %d & seq 1 %d >&2; wait", n, n)), s), 0)
	for _, k := range []protocol.ChunkKind{protocol.ChunkStdout, protocol.ChunkStderr} {
		if s.n[k] != int64(want.Len()) || !bytes.Equal(s.sum(k), wantSum[:]) {
			t.Errorf("%s: %d bytes with a different digest, want %d bytes of seq 1 %d", k, s.n[k], want.Len(), n)
		}
	}
}

// TestExecCoalesces: a thousand one-byte writes must not become a thousand
// chunks.
func TestExecCoalesces(t *testing.T) {
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), cmdReq("i=0; while [ $i -lt 1000 ]; do printf x; i=$((i+1)); done"), s), 0)
	if s.stdout() != strings.Repeat("x", 1000) {
		t.Fatalf("stdout is %d bytes, want 1000 x", len(s.stdout()))
	}
	if c := s.chunks[protocol.ChunkStdout]; c >= 500 {
		t.Errorf("1000 one-byte writes became %d chunks", c)
	}
}

func TestExecOutputCap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command string
		stdout  int64
		stderr  int64
		trunc   *protocol.Truncated
	}{
		{"stdout", "head -c 300000 /dev/zero; echo err >&2", 1000, 4, &protocol.Truncated{Stdout: true}},
		{"stderr", "head -c 300000 /dev/zero >&2; echo out", 4, 1000, &protocol.Truncated{Stderr: true}},
		{"both", "head -c 5000 /dev/zero; head -c 5000 /dev/zero >&2", 1000, 1000, &protocol.Truncated{Stdout: true, Stderr: true}},
		{"exactly", "head -c 1000 /dev/zero; head -c 999 /dev/zero >&2", 1000, 999, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			env.OutputCap = 1000
			s := newTestSink(t)
			eo := wantExec(t, run(t, context.Background(), env, cmdReq(tc.command), s), 0)
			if s.n[protocol.ChunkStdout] != tc.stdout || s.n[protocol.ChunkStderr] != tc.stderr {
				t.Errorf("got %d/%d bytes, want %d/%d", s.n[protocol.ChunkStdout], s.n[protocol.ChunkStderr], tc.stdout, tc.stderr)
			}
			if (eo.Truncated == nil) != (tc.trunc == nil) || (eo.Truncated != nil && *eo.Truncated != *tc.trunc) {
				t.Errorf("truncated %+v, want %+v", eo.Truncated, tc.trunc)
			}
		})
	}
}

var pidsLine = regexp.MustCompile(`PIDS (\d+) (\d+)\n`)

// procs are the shell's pid (= its pgid) and a descendant's.
type procs struct{ pgid, pid int }

// pids returns the procs the command printed as "PIDS $$ $!", and kills them
// at cleanup should the test fail.
func pids(t *testing.T, s *testSink) procs {
	t.Helper()
	m := pidsLine.FindStringSubmatch(s.stdout())
	if m == nil {
		t.Fatalf("the command did not print its pids; stdout %q", s.stdout())
	}
	var p procs
	p.pgid, _ = strconv.Atoi(m[1])
	p.pid, _ = strconv.Atoi(m[2])
	t.Cleanup(func() {
		if p.pid > 1 && procAlive(p.pid) {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
		if p.pgid > 1 && len(liveGroupMembers(p.pgid)) > 0 {
			syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	})
	return p
}

// onPIDs makes the sink call f once the pids line has arrived.
func onPIDs(s *testSink, f func()) {
	var once sync.Once
	s.onData = func(protocol.ChunkKind, []byte) error {
		if pidsLine.MatchString(s.stdout()) {
			once.Do(f)
		}
		return nil
	}
}

// procAlive reports whether pid is a live process: present in /proc and
// not a zombie (this machine's pid 1 may never reap orphans).
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[0] != "Z" && f[0] != "X"
}

// liveGroupMembers lists the live processes of the group pgid.
func liveGroupMembers(pgid int) []int {
	var live []int
	names, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(name)))
			live = append(live, pid)
		}
	}
	return live
}

func wantAllDead(t *testing.T, p procs) {
	t.Helper()
	pgid, pid := p.pgid, p.pid
	if procAlive(pgid) {
		t.Errorf("the shell %d is alive", pgid)
	}
	if procAlive(pid) {
		t.Errorf("the descendant %d is alive", pid)
	}
	if live := liveGroupMembers(pgid); len(live) > 0 {
		t.Errorf("process group %d still has live members %v", pgid, live)
	}
}

// Commands that leave a grandchild: a background job the shell waits for,
// and one in a subshell the shell does not know about.
var grandchildCommands = map[string]string{
	"wait":     "sleep 30 & echo PIDS $$ $!; wait",
	"subshell": "(sleep 30 & echo PIDS $$ $!); sleep 30",
}

// exec's cwd is contained like a file instruction's path:
// outside every allowed root, or in the executor's own files, the command
// never starts.
func TestExecCwdIsContained(t *testing.T) {
	ws := tempRealDir(t)
	outside := tempRealDir(t)
	state := ws + "/state"
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, ws+"/out-link"); err != nil {
		t.Fatal(err)
	}
	marker := outside + "/ran"
	for _, c := range []struct {
		env  *Env
		cwd  string
		says string
	}{
		{&Env{WorkspaceRoot: ws, AllowedRoots: []string{ws}}, outside, "outside every allowed root"},
		{&Env{WorkspaceRoot: ws, AllowedRoots: []string{ws}}, ws + "/out-link", "outside every allowed root"},
		{&Env{WorkspaceRoot: ws, AllowedRoots: []string{"/"}, NeverServe: []string{state}}, state, "never served"},
		{&Env{WorkspaceRoot: ws, AllowedRoots: []string{"/"}}, "/proc/self", "never served"},
	} {
		req := cmdReq("touch " + marker)
		req.Cwd = c.cwd
		wantFailure(t, run(t, context.Background(), c.env, req, nil), protocol.ErrPermissionDenied, "the working directory", c.says, "never started")
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the command ran in %s", c.cwd)
		}
	}
	// Inside, and with "/" allowed, the command runs where it was told.
	for _, env := range []*Env{{WorkspaceRoot: ws, AllowedRoots: []string{ws}}, {WorkspaceRoot: ws, AllowedRoots: []string{"/"}}} {
		req := cmdReq("pwd")
		req.Cwd = ws + "/state"
		s := newTestSink(t)
		wantExec(t, run(t, context.Background(), env, req, s), 0)
		if got := strings.TrimSpace(s.stdout()); got != state {
			t.Errorf("ran in %q, want %q", got, state)
		}
	}
}
