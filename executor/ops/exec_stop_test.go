//go:build linux

package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

func TestExecCancelKillsGroup(t *testing.T) {
	for name, command := range grandchildCommands {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			s := newTestSink(t)
			onPIDs(s, func() { cancel(ErrCancelled) })
			out := run(t, ctx, testEnv(t), cmdReq(command), s)
			if out != (protocol.CancelledOutcome{State: protocol.CancelKilled}) {
				t.Fatalf("outcome %#v, want cancelled killed", out)
			}
			wantAllDead(t, pids(t, s))
		})
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	for name, command := range grandchildCommands {
		t.Run(name, func(t *testing.T) {
			req := cmdReq(command)
			req.Timeout = time.Second
			s := newTestSink(t)
			f := wantFailure(t, run(t, context.Background(), testEnv(t), req, s), protocol.ErrTimeout, "1s", "killed")
			if strings.Contains(f.Message, "PIDS") || strings.Contains(f.Message, "sleep") {
				t.Errorf("the message %q carries output or command text", f.Message)
			}
			wantAllDead(t, pids(t, s))
		})
	}
}

// TestExecTermIgnored: a group that ignores SIGTERM gets SIGKILL after the
// grace.
func TestExecTermIgnored(t *testing.T) {
	env := testEnv(t)
	env.KillGrace = 100 * time.Millisecond
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s := newTestSink(t)
	onPIDs(s, func() { cancel(ErrCancelled) })
	out := run(t, ctx, env, cmdReq(`trap "" TERM; sleep 30 & echo PIDS $$ $!; wait; sleep 30`), s)
	if out != (protocol.CancelledOutcome{State: protocol.CancelKilled}) {
		t.Fatalf("outcome %#v, want cancelled killed", out)
	}
	wantAllDead(t, pids(t, s))
}

// TestExecBackgroundJobKilled: the shell exits 0 leaving a job that holds
// stdout open; the exec answers the shell's exit and the job is killed.
func TestExecBackgroundJobKilled(t *testing.T) {
	s := newTestSink(t)
	wantExec(t, run(t, context.Background(), testEnv(t), cmdReq("sleep 30 & echo PIDS $$ $!; exit 3"), s), 3)
	wantAllDead(t, pids(t, s))
}

// TestExecEscapedHolder: a descendant that leaves the group (setsid) and
// keeps stdout open cannot hold the exec open. It is out of reach of a group
// kill (docs/exec.md); the test kills it.
func TestExecEscapedHolder(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	// The shell exits only once the job has left the group, so the job
	// escapes the group kill that follows the shell's exit.
	command := `setsid sleep 30 & until [ "$(cut -d' ' -f5 /proc/$!/stat)" = "$!" ]; do :; done; echo PIDS $$ $!`
	s := newTestSink(t)
	eo := wantExec(t, run(t, context.Background(), testEnv(t), cmdReq(command), s), 0)
	if eo.Truncated != nil {
		t.Errorf("truncated %+v: nothing was lost", eo.Truncated)
	}
	p := pids(t, s) // its cleanup kills the escaped sleep
	if !procAlive(p.pid) {
		t.Errorf("the escaped job %d is dead: the test did not exercise a pipe held open", p.pid)
	}
}

// TestGroupGoneIgnoresZombies: a group whose only member is a zombie that
// nobody reaps is gone; a group with a live member is not.
func TestGroupGoneIgnoresZombies(t *testing.T) {
	start := func(command string) *os.Process {
		p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", command}, &os.ProcAttr{
			Dir: t.TempDir(),
			Sys: &syscall.SysProcAttr{Setpgid: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	live := start("sleep 30; exit 0") // dash forks sleep: a group of two
	defer live.Wait()
	defer syscall.Kill(-live.Pid, syscall.SIGKILL)
	if groupGone(live.Pid) {
		t.Errorf("a group with a sleeping member is reported gone")
	}

	zombie := start("exit 0")
	if err := waitExited(zombie.Pid); err != nil {
		t.Fatal(err)
	}
	// Exited, not reaped: a zombie that still holds its group.
	if err := syscall.Kill(-zombie.Pid, 0); err != nil {
		t.Fatalf("kill(-pgid, 0) on a zombie's group: %v", err)
	}
	if !groupGone(zombie.Pid) {
		t.Errorf("a group whose only member is a zombie is reported alive")
	}
	if _, err := zombie.Wait(); err != nil {
		t.Fatal(err)
	}
	if !groupGone(zombie.Pid) {
		t.Errorf("an empty group is reported alive")
	}
}

// TestExecFinishedBeforeCancel: a cancel that arrives after the shell has
// exited, even before Exec has noticed, is answered with the ordinary exec
// outcome and its exit chunk (R11).
func TestExecFinishedBeforeCancel(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s := newTestSink(t)
	onPIDs(s, func() {
		shell, _ := strconv.Atoi(pidsLine.FindStringSubmatch(s.stdout())[1])
		for procAlive(shell) { // until it is a zombie, or reaped
			time.Sleep(time.Millisecond)
		}
		cancel(ErrCancelled)
	})
	wantExec(t, run(t, ctx, testEnv(t), cmdReq("echo PIDS $$ $$; exit 7"), s), 7)
}

// TestExecEscapedWriter: a descendant that left the group and keeps writing
// to stdout is read for at most the drain budget; the stream is reported
// truncated.
func TestExecEscapedWriter(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	command := `setsid yes & until [ "$(cut -d' ' -f5 /proc/$!/stat)" = "$!" ]; do :; done; echo PIDS $$ $!`
	s := newTestSink(t)
	eo := wantExec(t, run(t, context.Background(), testEnv(t), cmdReq(command), s), 0)
	if eo.Truncated == nil || !eo.Truncated.Stdout || eo.Truncated.Stderr {
		t.Errorf("truncated %+v, want stdout", eo.Truncated)
	}
	pids(t, s)
}

func TestExecCancelBeforeStart(t *testing.T) {
	env := testEnv(t)
	marker := filepath.Join(env.WorkspaceRoot, "ran")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCancelled)
	s := newTestSink(t)
	out := run(t, ctx, env, cmdReq("touch "+marker), s)
	if out != (protocol.CancelledOutcome{State: protocol.CancelNotStarted}) {
		t.Fatalf("outcome %#v, want cancelled not_started", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran")
	}
	if len(s.chunks) != 0 {
		t.Errorf("chunks %v for a command that never started", s.chunks)
	}
}

func TestExecAborted(t *testing.T) {
	shutdown := errors.New("the executor is shutting down")

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(shutdown)
	wantFailure(t, run(t, ctx, testEnv(t), cmdReq("true"), nil), protocol.ErrAborted, "not started", shutdown.Error())

	ctx, cancel = context.WithCancelCause(context.Background())
	defer cancel(nil)
	s := newTestSink(t)
	onPIDs(s, func() { cancel(shutdown) })
	wantFailure(t, run(t, ctx, testEnv(t), cmdReq(grandchildCommands["wait"]), s), protocol.ErrAborted, shutdown.Error(), "killed")
	wantAllDead(t, pids(t, s))
}

func TestExecSinkError(t *testing.T) {
	broken := errors.New("outbox closed")
	s := newTestSink(t)
	s.onData = func(protocol.ChunkKind, []byte) error { return broken }
	wantFailure(t, run(t, context.Background(), testEnv(t), cmdReq(grandchildCommands["wait"]), s), protocol.ErrAborted, broken.Error())
	wantAllDead(t, pids(t, s))
	if c := s.chunks[protocol.ChunkStdout] + s.chunks[protocol.ChunkStderr]; c != 1 {
		t.Errorf("%d chunks after the sink failed on the first, want no more calls", c-1)
	}
}

// exitSink fails the exit chunk.
type exitSink struct{ *testSink }

func (exitSink) Exit(int) error { return errors.New("outbox closed") }

func TestExecExitChunkError(t *testing.T) {
	out := Exec(context.Background(), testEnv(t), cmdReq("exit 5"), exitSink{newTestSink(t)})
	wantFailure(t, out, protocol.ErrAborted, "exit code 5", "outbox closed")
}

// BenchmarkExecTrue and BenchmarkLocalShTrue: the cost of an exec of a
// command that does nothing, against os/exec running the same shell.
func BenchmarkExecTrue(b *testing.B) {
	env := &Env{WorkspaceRoot: b.TempDir()}
	req := cmdReq("true")
	for b.Loop() {
		if out := Exec(context.Background(), env, req, discardSink{}); out != (protocol.ExecOutcome{}) {
			b.Fatalf("outcome %#v", out)
		}
	}
}

func BenchmarkLocalShTrue(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		c := exec.Command("/bin/sh", "-c", "true")
		c.Dir = dir
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

const throughputBytes = 256 << 20

// BenchmarkExecThroughput and BenchmarkLocalPipeThroughput: 256 MiB of
// stdout through Exec's chunks, against reading the same command's pipe
// with os/exec into a 64 KiB buffer.
func BenchmarkExecThroughput(b *testing.B) {
	env := &Env{WorkspaceRoot: b.TempDir()}
	req := cmdReq(fmt.Sprintf("head -c %d /dev/zero", throughputBytes))
	b.SetBytes(throughputBytes)
	for b.Loop() {
		var sink countSink
		if out := Exec(context.Background(), env, req, &sink); out != (protocol.ExecOutcome{}) || sink.n != throughputBytes {
			b.Fatalf("outcome %#v after %d bytes", out, sink.n)
		}
	}
}

func BenchmarkLocalPipeThroughput(b *testing.B) {
	dir := b.TempDir()
	b.SetBytes(throughputBytes)
	buf := make([]byte, MaxChunkBytes)
	for b.Loop() {
		c := exec.Command("/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero", throughputBytes))
		c.Dir = dir
		r, err := c.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
		if err != nil || n != throughputBytes {
			b.Fatalf("%d bytes, %v", n, err)
		}
		if err := c.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

type discardSink struct{}

func (discardSink) Data(protocol.ChunkKind, []byte) error { return nil }
func (discardSink) Exit(int) error                        { return nil }

type countSink struct{ n int64 }

func (s *countSink) Data(_ protocol.ChunkKind, p []byte) error { s.n += int64(len(p)); return nil }
func (s *countSink) Exit(int) error                            { return nil }
