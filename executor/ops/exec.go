//go:build linux || darwin

package ops

// The exec family: exec and execStream (§3.1, §4). Both run the same way on
// the device; docs/exec.md describes the behaviour and the decisions below.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sema-agent/sema/executor/sandbox"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/protocol"
)

// Exec runs an exec or execStream instruction: Shell -c command, in its own
// process group, under env.Sandbox, in req.Cwd (or env.WorkspaceRoot), with
// req.ShellEnv merged over the executor's environment (less its own SEMA_
// variables) and stdin on /dev/null.
//
// stdout and stderr go to sink as chunks of 1..MaxChunkBytes bytes, each
// stream in order, coalesced for up to a few milliseconds; at most
// env.OutputCap bytes per stream, the rest read and dropped. When the
// command ran to the end, Exec sends exactly one Exit chunk, last, and
// returns ExecOutcome with the same exit code: the exit status, or 128+signo
// when a signal killed the shell.
//
// After the shell exits, whatever is left of its process group (a
// background job), and under a sandbox that follows trees whatever left the
// group, is killed like a cancelled command: nothing the instruction
// started may outlive it (§8).
//
// A timeout (req.Timeout), a cancel (ctx cancelled with cause ErrCancelled)
// or any other end of ctx kills the whole group: SIGTERM, env.KillGrace,
// SIGKILL. The answers are Failure timeout, CancelledOutcome killed (or
// not_started when ctx ended before the command was spawned) and Failure
// aborted; each only when the group is known dead, otherwise Failure
// outcome_unknown. None of them sends an Exit chunk. If the command exited
// on its own before the stop took effect, its ordinary ExecOutcome is the
// answer (R11). A Sink error kills the group and answers aborted.
//
// Exec calls sink from one goroutine at a time and returns only after every
// goroutine it started has ended (the one exception: a leader that survives
// SIGKILL for killWait, see docs/exec.md).
func Exec(ctx context.Context, env *Env, req Request, sink Sink) protocol.Outcome {
	if env == nil {
		env = &Env{}
	}
	if ctx.Err() != nil {
		return execNotStarted(ctx)
	}
	probe.Mark(probe.ExecStarted)
	cmd, fail := prepareExec(env, req)
	if fail != nil {
		return *fail
	}
	c, stdout, stderr, out := spawnShell(ctx, cmd)
	if out != nil {
		return out
	}
	probe.Mark(probe.ExecSpawned)
	defer c.tree.Close()
	if req.Spawned != nil {
		req.Spawned(c.pgid)
	}
	c.startWaiter()
	rout, rerr := newPipeReader(stdout), newPipeReader(stderr)
	defer stdout.Close()
	defer stderr.Close()
	go rout.run()
	go rerr.run()
	em := newEmitter(sink, cmd.outputCap)
	go em.run(rout, rerr)

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	why := stopNone
	select {
	case <-c.exited:
		probe.Mark(probe.ExecExited)
	case <-ctx.Done():
		why = stopContext
	case <-timeout:
		why = stopTimeout
	case <-em.failed:
		why = stopSink
	}
	if why == stopSink && ctx.Err() != nil {
		// A sink blocked on back-pressure may fail because ctx ended: the
		// stop is the context's (a cancel answers cancelled, not aborted).
		why = stopContext
	}
	if (why == stopContext || why == stopTimeout) && c.hasExited() {
		why = stopNone // it finished on its own before the stop took effect (R11)
	}
	if why == stopContext || why == stopSink {
		em.discard.Store(true)
	}
	res := c.stop(cmd.killGrace)
	rout.startDrain()
	rerr.startDrain()
	<-em.done
	rout.putBuffers()
	rerr.putBuffers()

	switch why {
	case stopTimeout:
		if !res.dead {
			return execUnconfirmed(cmd, "the command ran past its timeout of %s", req.Timeout)
		}
		return protocol.Fail(protocol.ErrTimeout,
			"the command did not finish within its timeout of %s; its process group was killed (%s)",
			req.Timeout, howKilled(cmd, res))
	case stopContext:
		cause := context.Cause(ctx)
		if !res.dead {
			return execUnconfirmed(cmd, "the command was stopped (%v)", cause)
		}
		if errors.Is(cause, ErrCancelled) {
			return protocol.CancelledOutcome{State: protocol.CancelKilled}
		}
		return protocol.Fail(protocol.ErrAborted,
			"the command was stopped because %v; its process group was killed (%s)", cause, howKilled(cmd, res))
	case stopSink:
		if !res.dead {
			return execUnconfirmed(cmd, "the command's output could not be delivered (%v)", em.err)
		}
		return protocol.Fail(protocol.ErrAborted,
			"the command's output could not be delivered (%v); its process group was killed (%s)",
			em.err, howKilled(cmd, res))
	}

	// The shell exited on its own, so it is reaped or about to be.
	<-c.reaped
	if c.err != nil {
		return protocol.Fail(protocol.ErrOutcomeUnknown,
			"the command ran but its exit status could not be read: %v", c.err)
	}
	code := execExitCode(c.state)
	if em.err != nil {
		return protocol.Fail(protocol.ErrAborted,
			"the command finished with exit code %d but its output could not be delivered: %v", code, em.err)
	}
	probe.Mark(probe.ExecExitChunk)
	if err := sink.Exit(code); err != nil {
		return protocol.Fail(protocol.ErrAborted,
			"the command finished with exit code %d but its exit chunk could not be delivered: %v", code, err)
	}
	return protocol.ExecOutcome{ExitCode: code, Truncated: execTruncation(em, rout, rerr)}
}

// stopReason is why Exec stopped waiting for the shell.
type stopReason int

const (
	stopNone    stopReason = iota // the shell exited on its own
	stopContext                   // ctx ended: a cancel or the runtime's stop
	stopTimeout                   // req.Timeout elapsed
	stopSink                      // the Sink failed
)

// execCmd is a validated exec instruction, ready to spawn.
type execCmd struct {
	shell     string   // resolved path of the shell
	argv      []string // shell -c command
	dir       string   // working directory
	env       []string // the command's environment
	sandbox   *sandbox.Sandbox
	outputCap int64
	killGrace time.Duration
}

// prepareExec validates the request and resolves everything the spawn needs.
// A failure here means the command never started.
func prepareExec(env *Env, req Request) (*execCmd, *protocol.Failure) {
	fail := func(code protocol.ErrorCode, format string, a ...any) (*execCmd, *protocol.Failure) {
		f := protocol.Fail(code, format, a...)
		return nil, &f
	}
	args, ok := req.Args.(protocol.CommandArgs)
	if !ok || !req.Kind.IsExec() {
		return fail(protocol.ErrInvalid, "exec cannot run a %s instruction with %T arguments", req.Kind, req.Args)
	}
	if strings.IndexByte(args.Command, 0) >= 0 {
		return fail(protocol.ErrInvalid, "the command contains a NUL byte, which no shell can receive")
	}
	cenv, err := commandEnv(env.Sandbox, req.ShellEnv)
	if err != nil {
		return fail(protocol.ErrInvalid, "%v", err)
	}

	dir := req.Cwd
	if dir == "" {
		dir = env.WorkspaceRoot
		if dir == "" {
			return fail(protocol.ErrInvalid, "the instruction has no cwd and the executor has no workspace root to run it in")
		}
	}
	if !filepath.IsAbs(dir) {
		return fail(protocol.ErrInvalid, "the working directory %q is not an absolute path", dir)
	}
	if f := execCheckDir(dir); f != nil {
		return nil, f
	}
	if f := execContainDir(env, dir); f != nil {
		return nil, f
	}

	shell := env.Shell
	if shell == "" {
		shell = DefaultShell
	}
	path, err := exec.LookPath(shell)
	if err != nil {
		if ee, ok := errors.AsType[*exec.Error](err); ok {
			err = ee.Err
		}
		return fail(protocol.ErrShellUnavailable, "the shell %s cannot be used: %v; the command never started", shell, err)
	}

	cmd := &execCmd{
		shell:     path,
		argv:      []string{shell, "-c", args.Command},
		dir:       dir,
		env:       cenv,
		sandbox:   env.Sandbox,
		outputCap: env.OutputCap,
		killGrace: env.KillGrace,
	}
	if cmd.outputCap <= 0 {
		cmd.outputCap = DefaultOutputCap
	}
	if cmd.killGrace <= 0 {
		cmd.killGrace = DefaultKillGrace
	}
	return cmd, nil
}

// commandEnv is the executor's environment less its own SEMA_ variables
// (the API key among them: a command never sees them), with TMPDIR set to
// the sandbox's temporary directory, and extra merged over it: a variable
// named in extra replaces the executor's, the others are appended in name
// order.
func commandEnv(sb *sandbox.Sandbox, extra map[string]string) ([]string, error) {
	base := sandbox.CommandEnv(sb, os.Environ())
	if len(extra) == 0 {
		return base, nil
	}
	keys := slices.Sorted(maps.Keys(extra))
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("shellEnv has an invalid variable name %q", k)
		}
		if strings.IndexByte(extra[k], 0) >= 0 {
			return nil, fmt.Errorf("the value of shellEnv variable %s contains a NUL byte", k)
		}
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := extra[k]; !over {
			out = append(out, kv)
		}
	}
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out, nil
}

// execCheckDir fails unless dir is an existing directory. A missing cwd is
// not_found: nothing was started, and the model can act on the name.
func execCheckDir(dir string) *protocol.Failure {
	fi, err := os.Stat(dir)
	var f protocol.Failure
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		f = protocol.Fail(protocol.ErrNotDirectory, "the working directory %s is not a directory; the command never started", dir)
	case errors.Is(err, fs.ErrNotExist):
		f = protocol.Fail(protocol.ErrNotFound, "the working directory %s does not exist; the command never started", dir)
	case errors.Is(err, fs.ErrPermission):
		f = protocol.Fail(protocol.ErrPermissionDenied, "the working directory %s is not accessible: %v; the command never started", dir, execErrno(err))
	case errors.Is(err, syscall.ENOTDIR):
		f = protocol.Fail(protocol.ErrNotDirectory, "the working directory %s is not a directory (a component of it is not); the command never started", dir)
	default:
		f = protocol.Fail(protocol.ErrSpawnError, "the working directory %s cannot be used: %v; the command never started", dir, execErrno(err))
	}
	return &f
}

// execContainDir refuses a working directory that containment refuses
// (§6.6): outside every allowed root, or the executor's own files. The
// command runs in dir as given, never in another place. This guards the
// working directory only: the command is a shell and can go anywhere the
// user can (docs/executor.md, "Containment").
func execContainDir(env *Env, dir string) *protocol.Failure {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		f := protocol.Fail(protocol.ErrSpawnError, "the working directory %s cannot be resolved: %v; the command never started", dir, execErrno(err))
		return &f
	}
	f := policyOf(env).check(dir, real)
	if f != nil {
		f.Message = "the working directory " + f.Message + "; the command never started"
	}
	return f
}

// spawnShell starts the shell in its own process group with stdin on /dev/null
// and stdout and stderr on fresh pipes, whose read ends it returns.
func spawnShell(ctx context.Context, cmd *execCmd) (c *shellProc, stdout, stderr *os.File, fail protocol.Outcome) {
	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	outR, outW, err := outputPipe()
	if err != nil {
		return nil, nil, nil, protocol.Fail(protocol.ErrSpawnError, "cannot create the stdout pipe: %v; the command never started", execErrno(err))
	}
	closers = append(closers, outR, outW)
	errR, errW, err := outputPipe()
	if err != nil {
		closeAll()
		return nil, nil, nil, protocol.Fail(protocol.ErrSpawnError, "cannot create the stderr pipe: %v; the command never started", execErrno(err))
	}
	closers = append(closers, errR, errW)
	null, err := stdinNull.get()
	if err != nil {
		closeAll()
		return nil, nil, nil, protocol.Fail(protocol.ErrSpawnError, "cannot open %s for stdin: %v; the command never started", os.DevNull, execErrno(err))
	}
	if ctx.Err() != nil { // the last moment at which nothing has happened
		closeAll()
		return nil, nil, nil, execNotStarted(ctx)
	}
	p, tree, err := cmd.sandbox.Launch(cmd.shell, cmd.argv, &os.ProcAttr{
		Dir:   cmd.dir,
		Env:   cmd.env,
		Files: []*os.File{null, outW, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: !cmd.sandbox.NewSession(), Setsid: cmd.sandbox.NewSession()},
	})
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, nil, spawnFailure(cmd, err)
	}
	return newShellProc(p, tree), outR, errR, nil
}

// stdinNull is every command's stdin: /dev/null, opened once and kept.
var stdinNull devNull

// devNull is /dev/null, opened for reading at its first use and kept open;
// a failed open is tried again at the next use.
type devNull struct {
	mu sync.Mutex
	f  *os.File
}

func (s *devNull) get() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		s.f = f
	}
	return s.f, nil
}

// spawnFailure classifies a failed spawn. The child's chdir and its exec of
// the shell fail with the same errno values, so the cwd is checked again to
// tell them apart.
func spawnFailure(cmd *execCmd, err error) protocol.Failure {
	if se, ok := errors.AsType[*sandbox.EnterError](err); ok {
		return protocol.Fail(protocol.ErrSpawnError, "%v; the command never started", se)
	}
	errno := execErrno(err)
	switch errno {
	case syscall.ENOENT, syscall.EACCES, syscall.ENOTDIR, syscall.ELOOP, syscall.ENAMETOOLONG:
		if f := execCheckDir(cmd.dir); f != nil {
			return *f
		}
		if syscall.Access(cmd.dir, 1 /* X_OK */) != nil {
			return protocol.Fail(protocol.ErrPermissionDenied, "cannot enter the working directory %s: %v; the command never started", cmd.dir, errno)
		}
		return protocol.Fail(protocol.ErrShellUnavailable, "the shell %s cannot be executed: %v; the command never started", cmd.shell, errno)
	case syscall.ENOEXEC:
		return protocol.Fail(protocol.ErrShellUnavailable, "the shell %s is not an executable this system can run: %v; the command never started", cmd.shell, errno)
	}
	return protocol.Fail(protocol.ErrSpawnError, "cannot start the shell %s in %s: %v; the command never started", cmd.shell, cmd.dir, errno)
}

// execErrno is the OS error inside err (a *PathError, *SyscallError, ...), so
// that messages name the OS error once, without repeating the path.
func execErrno(err error) error {
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		return errno
	}
	return err
}

// execNotStarted answers an exec whose ctx ended before the command was spawned.
func execNotStarted(ctx context.Context) protocol.Outcome {
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrCancelled) {
		return protocol.CancelledOutcome{State: protocol.CancelNotStarted}
	}
	return protocol.Fail(protocol.ErrAborted, "the command was not started because %v", cause)
}

// execUnconfirmed answers a stopped command whose process group could not be
// confirmed dead: nobody can say what it did or is still doing.
func execUnconfirmed(cmd *execCmd, format string, a ...any) protocol.Failure {
	return protocol.Fail(protocol.ErrOutcomeUnknown,
		"%s; its process group was sent SIGTERM and, after %s, SIGKILL, but is not confirmed dead %s later",
		fmt.Sprintf(format, a...), cmd.killGrace, killWait)
}

// howKilled says which signal ended the group.
func howKilled(cmd *execCmd, res groupStop) string {
	if res.killed {
		return fmt.Sprintf("SIGTERM, then SIGKILL after %s", cmd.killGrace)
	}
	return "SIGTERM"
}

// execTruncation says which streams lost output: to the cap, or to a reader that
// stopped early (see pipeReader.lost). Nil when nothing was lost.
func execTruncation(em *emitter, stdout, stderr *pipeReader) *protocol.Truncated {
	t := protocol.Truncated{
		Stdout: em.streams[0].truncated || stdout.lost,
		Stderr: em.streams[1].truncated || stderr.lost,
	}
	if !t.Stdout && !t.Stderr {
		return nil
	}
	return &t
}
