package executor_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// The executor against the real lane, in-process over loopback: enroll
// through the lane's HTTP plane, serve, run an exec and a file read
// dispatched by the lane, and revoke. (The fault-injection suites run
// against internal/fakelane; this proves the two ends agree on the wire.)
func TestEndToEndWithTheRealLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	l := startRealLane(t)
	srv, ws, done := l.srv, l.ws, l.runDone

	call, err := srv.Dispatch(ctx, l.deviceID, lane.Instruction{Kind: protocol.KindExec,
		Args: protocol.CommandArgs{Command: "echo hello; echo oops >&2; exit 3"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	var settled *lane.Settlement
	for settled == nil {
		ev, err := call.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Settled != nil:
			settled = ev.Settled
		case ev.Chunk.Kind == protocol.ChunkStdout:
			stdout.Write(ev.Chunk.Data)
		case ev.Chunk.Kind == protocol.ChunkStderr:
			stderr.Write(ev.Chunk.Data)
		}
	}
	if o, ok := settled.Outcome.(protocol.ExecOutcome); !ok || o.ExitCode != 3 || stdout.String() != "hello\n" || stderr.String() != "oops\n" {
		t.Fatalf("exec settled %+v, stdout %q, stderr %q", settled, stdout.String(), stderr.String())
	}

	path := filepath.Join(ws, "f.txt")
	writeFileOS(t, path, "file content\n")
	call, err = srv.Dispatch(ctx, l.deviceID, lane.Instruction{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: path}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var data strings.Builder
	for {
		ev, err := call.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Settled != nil {
			if ev.Settled.Outcome.Kind() != protocol.OutcomeRead || data.String() != "file content\n" {
				t.Fatalf("read settled %+v, data %q", ev.Settled, data.String())
			}
			break
		}
		data.Write(ev.Chunk.Data)
	}

	// Revocation through the user plane ends the executor for good: the
	// key is the executor's to delete (the CLI does), Run returns
	// ErrRevoked.
	revokeHTTP(t, l.url, l.apiKey, l.deviceID)
	select {
	case err := <-done:
		done <- err
		if !errors.Is(err, executor.ErrRevoked) {
			t.Fatalf("Run after revocation: %v, want ErrRevoked", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not end after the device was revoked")
	}
}
