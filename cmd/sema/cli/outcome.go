package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// This file turns the client's calls into the exit codes of run and fs
// (the README's table): how a call failed, and how an outcome ended.

// chunkSink takes a stream's chunks in order: stdout, stderr or data.
type chunkSink func(kind protocol.ChunkKind, data []byte) error

// instruct posts one instruction and follows it to its outcome; the error
// carries the exit code when the outcome is not known or never came.
func instruct(ctx context.Context, lc *client.Client, deviceID string, in api.InstructionRequest, sink client.Sink) (client.Result, error) {
	res, err := lc.Instruct(ctx, deviceID, in, sink)
	return res, callError(err)
}

// upload is instruct for the streamed write upload.
func upload(ctx context.Context, lc *client.Client, deviceID string, in api.UploadRequest, body io.Reader, size int64, sum protocol.Digest, sink client.Sink) (client.Result, error) {
	res, err := lc.Upload(ctx, deviceID, in, body, size, sum, sink)
	return res, callError(err)
}

// callError maps the client's errors: a path or command that is not
// UTF-8 is usage (nothing was sent); a Ctrl-C before anything was sent
// (or during an upload's body, which then writes nothing) is 130; the
// lane's refusal, an unreachable lane or a local failure before the lane
// took it is 125; a broken stream, a replica that failed after a forwarded
// request reached it (outcome_unknown) or a connection that broke after the
// request was sent is 255: the command may have run.
func callError(err error) error {
	var se *client.StreamError
	var ue *client.UnreachableError
	var ce *client.Error
	var text *client.NotUTF8Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &text):
		return usageError{err} // a bad argument: nothing was sent
	case errors.Is(err, client.ErrNotSent), errors.Is(err, client.ErrUploadStopped):
		return &ExitError{Code: ExitCancelled, Err: err}
	case errors.As(err, &se):
		return &ExitError{Code: ExitLaneFailure, Err: err}
	case errors.As(err, &ce) && ce.MayHaveRun(), errors.As(err, &ue) && ue.MayHaveRun():
		return &ExitError{Code: ExitLaneFailure, Err: fmt.Errorf("%w (the command may have run; it is not retried)", err)}
	case errors.As(err, &ue):
		return &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("%w (nothing was sent)", err)}
	case errors.As(err, &ce):
		return &ExitError{Code: ExitNeverStarted, Err: err}
	}
	return &ExitError{Code: ExitNeverStarted, Err: err}
}

// neverStartedNote is what a message of a refusal needs to say that the
// work never started: nothing when it says so already, as the device's
// messages mostly do.
func neverStartedNote(msg string) string {
	for _, says := range []string{"never started", "was not run"} {
		if strings.Contains(msg, says) {
			return ""
		}
	}
	return " (it never started)"
}

// offlineNote says what brings a device online, when the lane refused an
// instruction because no executor of it is connected.
func offlineNote(o api.Outcome) string {
	if o.ErrorCode == protocol.ErrTargetUnavailable && strings.HasSuffix(o.Message, "is not connected") {
		return "; start `sema device serve` on it (sema devices shows which are online)"
	}
	return ""
}

// failure turns an outcome that is not the verb's success into an exit
// (nil for a success arm of wantKind): 254 the lane cancelled it on its
// own, 130 cancelled (the user's Ctrl-C alone), 125 never started,
// 124 timeout, 1 a definite answer of the device (not_found,
// permission_denied …: nothing changed), 255 anything else (the work may
// have run: outcome_unknown and the like).
func failure(r client.Result, wantKind protocol.OutcomeKind) error {
	o := r.Outcome
	fail := func(code int, format string, args ...any) error {
		return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case r.LaneCancelled:
		// Not the user's Ctrl-C: 130 stays theirs alone. The lane's
		// message starts "the lane cancelled the command: …".
		return fail(ExitLaneCancelled, "%s", o.Message)
	case o.OK && o.Kind == protocol.OutcomeCancelled:
		return fail(ExitCancelled, "cancelled (%s)", o.State)
	case o.OK && o.Kind == wantKind:
		return nil
	case o.OK:
		return fail(ExitLaneFailure, "an unexpected %q outcome", o.Kind)
	case r.NeverStarted():
		return fail(ExitNeverStarted, "%s: %s%s%s", o.ErrorCode, o.Message, neverStartedNote(o.Message), offlineNote(o))
	}
	switch o.ErrorCode {
	case protocol.ErrTimeout:
		return fail(ExitTimeout, "%s: %s (--timeout raises the limit)", o.ErrorCode, o.Message)
	case protocol.ErrAborted:
		if r.Interrupted {
			return fail(ExitCancelled, "%s: %s", o.ErrorCode, o.Message)
		}
	case protocol.ErrNotFound, protocol.ErrIsDirectory, protocol.ErrNotDirectory, protocol.ErrPermissionDenied,
		protocol.ErrAlreadyExists, protocol.ErrInvalid, protocol.ErrPreconditionFailed:
		return fail(ExitFailure, "%s: %s", o.ErrorCode, o.Message)
	}
	return fail(ExitLaneFailure, "%s: %s", o.ErrorCode, o.Message)
}
