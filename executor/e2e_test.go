package executor_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

// The executor against the real lane, in-process over loopback: enroll
// through the lane's HTTP plane, serve, run an exec and a file read
// dispatched by the lane, and revoke. (The fault-injection suites run
// against internal/fakelane; this proves the two ends agree on the wire.)
func TestEndToEndWithTheRealLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := lane.New(lane.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(context.Background())
	_, apiKey, err := lane.CreateIdentity(ctx, st, "user")
	if err != nil {
		t.Fatal(err)
	}
	token := issueTokenFor(t, hs.URL, apiKey)
	dir, ws := t.TempDir(), t.TempDir()
	rec, err := device.Enroll(ctx, device.EnrollOptions{Server: hs.URL, Token: token, APIKey: apiKey, WorkspaceRoot: ws, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	key, err := device.LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := executor.New(executor.Config{DeviceID: rec.DeviceID, Key: key, Server: rec.Server, WorkspaceRoot: rec.WorkspaceRoot,
		Logger: testLogger(t), StatusPath: filepath.Join(dir, device.StatusFile)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	defer func() {
		stop()
		<-done
	}()

	for !srv.Presence(rec.DeviceID).Online {
		select {
		case <-ctx.Done():
			t.Fatal("the device never came online")
		case <-time.After(10 * time.Millisecond):
		}
	}

	call, err := srv.Dispatch(ctx, rec.DeviceID, lane.Instruction{Kind: protocol.KindExec,
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
	call, err = srv.Dispatch(ctx, rec.DeviceID, lane.Instruction{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: path}, Timeout: 10 * time.Second})
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
	revokeHTTP(t, hs.URL, apiKey, rec.DeviceID)
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
