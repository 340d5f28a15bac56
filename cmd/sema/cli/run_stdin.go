package cli

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/protocol"
)

// The stdin of sema run (not interactive: the protocol has no stdin
// channel, §8). It is read to its end into a local spool file (its digest
// must be known before the upload, §3.4), uploaded to a temporary file on
// the device (createTempFile, then the streamed writeFile), and the command
// runs with that file as its stdin; the file is removed afterwards, also
// after a failure or Ctrl-C. An empty stdin costs nothing: the executor
// runs every command with stdin on /dev/null.

// cleanupTimeout bounds the removal of the device's stdin file.
const cleanupTimeout = 10 * time.Second

// remoteStdin is the stdin file on the device.
type remoteStdin struct {
	c    *cobra.Command
	lc   *client.Client
	dev  api.Device
	path string // "" when there is nothing to remove
}

// wrap makes command read the file: exec redirects the shell's own stdin
// for the rest of the script, so the command keeps its meaning (no
// subshell: exit, cd, traps and $? are its own) and its exit code. On a
// line of its own, a trailing comment of the command cannot swallow it.
func (in *remoteStdin) wrap(command string) string {
	if in == nil || in.path == "" {
		return command
	}
	return "exec <" + singleQuote(in.path) + "\n" + command
}

// uploadStdin spools Stdin and uploads it; nil when it was empty.
func uploadStdin(c *cobra.Command, lc *client.Client, dev api.Device, timeout time.Duration) (*remoteStdin, error) {
	spool, size, sum, err := spoolStdin(c.Context())
	if err != nil {
		return nil, nothingSent(fmt.Errorf("reading stdin: %w", err))
	}
	defer spool.Close() // already unlinked
	if size == 0 {
		return nil, nil
	}
	in := &remoteStdin{c: c, lc: lc, dev: dev}
	res, err := instruct(c.Context(), lc, dev.DeviceID, api.InstructionRequest{
		Kind: protocol.KindCreateTempFile, Args: protocol.TempFileArgs{Prefix: "sema-stdin-"}, TimeoutMs: timeout.Milliseconds(),
	}, client.Sink{})
	if err == nil {
		err = failure(res, protocol.OutcomeWrite)
	}
	if err != nil {
		return nil, stdinFailed(err)
	}
	in.path = res.Outcome.CanonicalPath
	prog := newProgress("stdin", size)
	res, err = upload(c.Context(), lc, dev.DeviceID, api.UploadRequest{Path: in.path, TimeoutMs: timeout.Milliseconds()},
		prog.reader(spool), size, sum, client.Sink{})
	prog.done()
	if err == nil {
		err = failure(res, protocol.OutcomeWrite)
	}
	if err != nil {
		in.remove()
		return nil, stdinFailed(err)
	}
	return in, nil
}

// stdinFailed: the command never started; a Ctrl-C stays 130.
func stdinFailed(err error) error {
	if ee, ok := err.(*ExitError); ok && (ee.Code == ExitCancelled || ee.Code == ExitLaneFailure) {
		return &ExitError{Code: ee.Code, Err: fmt.Errorf("uploading stdin: %w (the command was not sent)", ee.Err)}
	}
	return &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("uploading stdin: %w (the command never started)", err)}
}

// remove deletes the device's stdin file, best effort, whatever ended the
// run (Ctrl-C included: its own context); a failure is a clear warning.
func (in *remoteStdin) remove() {
	if in == nil || in.path == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(in.c.Context()), cleanupTimeout)
	defer cancel()
	no := false
	res, err := instruct(ctx, in.lc, in.dev.DeviceID, api.InstructionRequest{
		Kind: protocol.KindRemove, Args: protocol.DirArgs{Path: in.path, Recursive: &no}, TimeoutMs: cleanupTimeout.Milliseconds(),
	}, client.Sink{})
	if err == nil {
		err = failure(res, protocol.OutcomeVoid)
	}
	if err != nil {
		fmt.Fprintf(Stderr, "sema: warning: could not remove the stdin file %s on the device: %s\n", safetext.String(in.path), safetext.String(err.Error()))
	}
	in.path = ""
}

// spoolStdin copies Stdin into an unlinked temp file (0600) and hashes it
// on the way: the upload needs the digest first. The file is at offset 0.
// ctx ending (Ctrl-C) ends it with ErrStdinCancelled, also while a read of
// a stdin that has not ended blocks: the copy is then left to the
// process's exit, which follows.
func spoolStdin(ctx context.Context) (*os.File, int64, protocol.Digest, error) {
	f, err := os.CreateTemp("", "sema-stdin-*")
	if err != nil {
		return nil, 0, protocol.Digest{}, err
	}
	os.Remove(f.Name()) // gone with the last close, whatever happens
	h := sha256.New()
	type copied struct {
		n   int64
		err error
	}
	done := make(chan copied, 1)
	go func() {
		n, err := io.Copy(io.MultiWriter(f, h), Stdin)
		done <- copied{n, err}
	}()
	var c copied
	select {
	case c = <-done:
	case <-ctx.Done():
		return nil, 0, protocol.Digest{}, &ExitError{Code: ExitCancelled, Err: errStdinCancelled}
	}
	if c.err == nil {
		_, c.err = f.Seek(0, io.SeekStart)
	}
	if c.err != nil {
		f.Close()
		return nil, 0, protocol.Digest{}, c.err
	}
	return f, c.n, protocol.Digest(h.Sum(nil)), nil
}

// errStdinCancelled: Ctrl-C came while stdin was being read.
var errStdinCancelled = errors.New("cancelled: nothing was sent")
