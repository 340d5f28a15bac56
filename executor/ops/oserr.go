//go:build linux || darwin

package ops

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// This file turns what went wrong into the §3.3 error codes: OS errors by
// errno, and a stopped context by its cause (ops.go: ErrCancelled, the
// instruction's own timeout, anything else). Messages name the path and the
// OS error and never carry file contents (§6.9).

// errTimedOut is the context cause when the instruction's own timeoutMs
// elapsed (R12).
var errTimedOut = errors.New("timeoutMs elapsed")

// errnoOf extracts the errno from err, or 0.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// codeOf maps an OS error to an error code. Everything not listed is
// unknown: the message still carries the OS's own words.
func codeOf(err error) protocol.ErrorCode {
	switch errnoOf(err) {
	case unix.ENOENT:
		return protocol.ErrNotFound
	case unix.EISDIR:
		return protocol.ErrIsDirectory
	case unix.ENOTDIR:
		return protocol.ErrNotDirectory
	case unix.EACCES, unix.EPERM, unix.EROFS:
		return protocol.ErrPermissionDenied
	case unix.EEXIST:
		return protocol.ErrAlreadyExists
	case unix.ENAMETOOLONG:
		return protocol.ErrInvalid
	}
	return protocol.ErrUnknown
}

// errText is the OS's description of err without a repeated path: for a
// *fs.PathError (or *os.LinkError) only the underlying error.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	if errno := errnoOf(err); errno != 0 {
		return errno.Error()
	}
	return err.Error()
}

// osFailure is the failure for an OS error err met while doing verb to path.
func osFailure(verb, path string, err error) protocol.Failure {
	return failf(codeOf(err), "cannot %s %q: %s", verb, path, errText(err))
}

// stagingFailure is osFailure for a step of a write before its content
// reached the target (staging, §3.4): the failure removes the staging file,
// so the message says the target was not touched.
func stagingFailure(verb, path string, err error) protocol.Failure {
	f := osFailure(verb, path, err)
	f.Message += "; nothing was written"
	return f
}

// interrupted is the outcome of an op whose context was done: its own
// timeout, a server cancel, or any other cause (fence, shutdown). started
// says whether the op had begun on the machine (created a staging file,
// emitted output, changed something): a cancel then answers killed, else
// not_started. changed says whether a lasting change was left behind (a
// directory created, an entry removed): a timeout then answers
// outcome_unknown, because timeout is retryable and promises that nothing
// was left half-done (§3.3, R12).
func interrupted(ctx context.Context, r Request, started, changed bool) protocol.Outcome {
	what := string(r.Kind)
	if p := protocol.ArgsPath(r.Args); p != "" {
		what += " " + qpath(p)
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTimedOut) && changed:
		return failf(protocol.ErrOutcomeUnknown, "%s: stopped when its timeout of %v elapsed, after it had changed the filesystem: it is partly done", what, r.Timeout)
	case errors.Is(cause, errTimedOut):
		return failf(protocol.ErrTimeout, "%s: stopped when its timeout of %v elapsed; nothing was left half-done", what, r.Timeout)
	case errors.Is(cause, ErrCancelled):
		if started {
			return protocol.CancelledOutcome{State: protocol.CancelKilled}
		}
		return protocol.CancelledOutcome{State: protocol.CancelNotStarted}
	case changed:
		return failf(protocol.ErrAborted, "%s: stopped after it had changed the filesystem, so it is partly done: %v", what, cause)
	}
	return failf(protocol.ErrAborted, "%s: stopped: %v", what, cause)
}
