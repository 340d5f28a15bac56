package approve_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/lanetest"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/nexting"
	"github.com/sema-agent/sema/protocol"
)

// rig is the whole flow in one process: the real lane on SQLite behind
// httptest, the real executor enrolled into it and serving, its approval
// gate connected over a real unix socket to a simulated device. The gate
// and the device run on one fake clock (TTLs, resends, reconnection); the
// lane and the executor on the system clock.
type rig struct {
	lane     *lane.Server
	deviceID string
	ws       string
	clk      *clock.Fake
	dev      *simDevice
	gate     *approve.Gate
	sc       *nexting.SimConn // the device's current connection
}

func newRig(t *testing.T) *rig {
	ctx := testCtx(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := lane.New(lane.Config{Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(srv))
	t.Cleanup(func() {
		hs.Close()
		srv.Shutdown(context.Background())
	})
	_, apiKey, err := lane.CreateIdentity(ctx, st, "user")
	if err != nil {
		t.Fatal(err)
	}
	dir, ws := t.TempDir(), t.TempDir()
	rec, err := device.Enroll(ctx, device.EnrollOptions{Server: hs.URL, Token: issueToken(t, hs.URL, apiKey), APIKey: apiKey, WorkspaceRoot: ws, StateDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	key, err := device.LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}

	r := &rig{lane: srv, deviceID: rec.DeviceID, ws: rec.WorkspaceRoot, clk: clock.NewFake(epoch)}
	r.dev = newSimDevice(t, r.clk, nil)
	tg := r.dev.target()
	r.gate, err = approve.New(approve.Config{WorkspaceRoot: rec.WorkspaceRoot, Device: tg.String(), Dial: tg.Dial, Clock: r.dev.gclk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := executor.New(executor.Config{DeviceID: rec.DeviceID, Key: key, Server: rec.Server, WorkspaceRoot: rec.WorkspaceRoot,
		Logger: quiet, Gate: r.gate})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		<-done
		r.gate.Close()
	})
	for !srv.Presence(rec.DeviceID).Online {
		select {
		case <-ctx.Done():
			t.Fatal("the device never came online")
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.sc = r.dev.next(ctx)
	if err := r.gate.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func issueToken(t *testing.T, base, apiKey string) string {
	t.Helper()
	token, err := lanetest.IssueToken(t.Context(), base, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// dispatch sends an instruction through the lane; settle drains it.
func (r *rig) dispatch(ctx context.Context, t *testing.T, in lane.Instruction) *lane.Call {
	t.Helper()
	call, err := r.lane.Dispatch(ctx, r.deviceID, in)
	if err != nil {
		t.Fatal(err)
	}
	return call
}

func settle(ctx context.Context, t *testing.T, call *lane.Call) (protocol.Outcome, string) {
	t.Helper()
	var stdout strings.Builder
	for {
		ev, err := call.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Settled != nil {
			return ev.Settled.Outcome, stdout.String()
		}
		if ev.Chunk.Kind == protocol.ChunkStdout || ev.Chunk.Kind == protocol.ChunkData {
			stdout.Write(ev.Chunk.Data)
		}
	}
}

func execIn(cmd string, timeout time.Duration) lane.Instruction {
	return lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: cmd}, Timeout: timeout}
}

func writeFileOS(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// Lane → executor → gate → simulated device, and back: allow runs the
// command, deny refuses it, expiry refuses it, a server cancel answers the
// cancel receipt, a lost device refuses it; writes inside the workspace
// run without asking, writes outside ask. Every refusal is
// permission_denied with its reason, and leaves no side effect.
func TestEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	r := newRig(t)
	marker := func(name string) string { return filepath.Join(r.ws, name) }
	ask := func(in lane.Instruction, summary string) *lane.Call {
		t.Helper()
		call := r.dispatch(ctx, t, in)
		v := waitView(ctx, t, r.sc, "the request", pending)
		if v.Summary != summary {
			t.Fatalf("the device shows %q, want %q", v.Summary, summary)
		}
		return call
	}

	t.Run("allow runs the command", func(t *testing.T) {
		call := ask(execIn("echo allowed > allow.txt && echo done", time.Minute), "Run: echo allowed > allow.txt && echo done")
		if exists(marker("allow.txt")) {
			t.Fatal("the command ran before allow")
		}
		r.sc.Press(nexting.ChoiceAllow)
		o, out := settle(ctx, t, call)
		if e, ok := o.(protocol.ExecOutcome); !ok || e.ExitCode != 0 || out != "done\n" {
			t.Fatalf("settled %+v, stdout %q", o, out)
		}
		if b, err := os.ReadFile(marker("allow.txt")); err != nil || string(b) != "allowed\n" {
			t.Fatalf("side effect: %q %v", b, err)
		}
	})

	t.Run("deny refuses it", func(t *testing.T) {
		call := ask(execIn("touch deny.txt", time.Minute), "Run: touch deny.txt")
		r.sc.Press(nexting.ChoiceDeny)
		o, _ := settle(ctx, t, call)
		wantDenied(t, o, "denied")
		if exists(marker("deny.txt")) {
			t.Fatal("a denied command ran")
		}
	})

	t.Run("expiry refuses it", func(t *testing.T) {
		call := ask(execIn("touch expire.txt", 10*time.Second), "Run: touch expire.txt")
		if v := r.sc.View(); v.Remaining != 5*time.Second { // half of timeoutMs
			t.Fatalf("TTL %v, want 5s", v.Remaining)
		}
		r.dev.gclk.advancePast(ctx, t, 5*time.Second)
		o, _ := settle(ctx, t, call)
		wantDenied(t, o, "expired")
		r.sc.Press(nexting.ChoiceAllow) // too late: nothing is pending any more
		if exists(marker("expire.txt")) {
			t.Fatal("an expired command ran")
		}
	})

	t.Run("a server cancel withdraws it", func(t *testing.T) {
		call := ask(execIn("touch cancel.txt", time.Minute), "Run: touch cancel.txt")
		call.Cancel()
		o, _ := settle(ctx, t, call)
		if c, ok := o.(protocol.CancelledOutcome); !ok || c.State != protocol.CancelNotStarted {
			t.Fatalf("settled %+v, want cancelled not_started", o)
		}
		waitView(ctx, t, r.sc, "the request withdrawn", func(v nexting.SimView) bool { return v.State == nexting.DeviceIdle })
		if exists(marker("cancel.txt")) {
			t.Fatal("a cancelled command ran")
		}
	})

	t.Run("writes inside the workspace run without asking, outside they ask", func(t *testing.T) {
		o, _ := settle(ctx, t, r.dispatch(ctx, t, lane.Instruction{Kind: protocol.KindWriteFile,
			Args: protocol.WriteArgs{Path: marker("inside.txt")}, Content: []byte("in"), Timeout: time.Minute}))
		if o.Kind() != protocol.OutcomeWrite || !exists(marker("inside.txt")) {
			t.Fatalf("inside write settled %+v", o)
		}
		outside := filepath.Join(t.TempDir(), "outside.txt")
		call := ask(lane.Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: outside}, Content: []byte("out"), Timeout: time.Minute},
			"Write 3 bytes to "+outside)
		r.sc.Press(nexting.ChoiceDeny)
		o, _ = settle(ctx, t, call)
		wantDenied(t, o, "denied")
		if exists(outside) {
			t.Fatal("a denied write landed")
		}
	})

	t.Run("a lost device refuses it", func(t *testing.T) {
		call := ask(execIn("touch lost.txt", time.Minute), "Run: touch lost.txt")
		r.sc.Close()
		o, _ := settle(ctx, t, call)
		wantDenied(t, o, "lost")
		if exists(marker("lost.txt")) {
			t.Fatal("a command ran after its device was lost")
		}
		// The gate reconnects after RetryInterval, and asks again.
		r.dev.gclk.advancePast(ctx, t, 2*time.Second) // RetryInterval
		r.sc = r.dev.next(ctx)
		if err := r.gate.WaitConnected(ctx); err != nil {
			t.Fatal(err)
		}
		call = ask(execIn("touch back.txt", time.Minute), "Run: touch back.txt")
		r.sc.Press(nexting.ChoiceAllow)
		if o, _ := settle(ctx, t, call); o.Kind() != protocol.OutcomeExec || !exists(marker("back.txt")) {
			t.Fatalf("after reconnecting: %+v", o)
		}
	})
}

// A write waiting for approval takes its payload as it comes: the lane
// sends a 6 MiB write (24 parts, more than the write's queue of 16) and
// then a read, in that order on one socket; the read is answered while the
// write still waits for the person. (Against the fake lane, which writes
// frames exactly in this order.)
func TestAWaitingWriteDoesNotStallTheSocket(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	dev := newSimDevice(t, fc, nil)
	ws := t.TempDir()
	tg := dev.target()
	gate, err := approve.New(approve.Config{WorkspaceRoot: ws, Device: tg.String(), Dial: tg.Dial, Clock: dev.gclk})
	if err != nil {
		t.Fatal(err)
	}
	l := fakelane.New(t, "")
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	deviceID := ids.New(ids.Device)
	l.AddDevice(deviceID, pub)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := executor.New(executor.Config{DeviceID: deviceID, Key: priv, Server: l.URL(), WorkspaceRoot: ws, Logger: quiet, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	defer func() {
		stop()
		<-done
		gate.Close()
	}()
	c, err := l.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Handshake(ctx, 1, 15000, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.AutoAck(true)
	sc := dev.next(ctx)

	content := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16)
	sum := protocol.Digest(sha256.Sum256(content))
	outside := filepath.Join(t.TempDir(), "big.bin")
	wid, rid := ids.New(ids.Instruction), ids.New(ids.Instruction)
	c.Send(&protocol.Instruction{Gen: 1, InstructionID: wid, RootSessionID: "s", Kind: protocol.KindWriteFile,
		Args: protocol.WriteArgs{Path: outside, ContentLen: int64(len(content)), SHA256: sum}, TimeoutMs: 60000})
	c.Send(&protocol.Payload{Gen: 1, InstructionID: wid, Part: protocol.PartBegin, TotalLen: int64(len(content)), SHA256: sum})
	for off := 0; off < len(content); off += protocol.DefaultPayloadPartBytes {
		end := min(off+protocol.DefaultPayloadPartBytes, len(content))
		c.Send(&protocol.Payload{Gen: 1, InstructionID: wid, Part: protocol.PartChunk, Offset: int64(off), Data: content[off:end]})
	}
	c.Send(&protocol.Payload{Gen: 1, InstructionID: wid, Part: protocol.PartCommit, TotalLen: int64(len(content)), SHA256: sum})
	writeFileOS(t, filepath.Join(ws, "r.txt"), "served\n")
	c.Send(&protocol.Instruction{Gen: 1, InstructionID: rid, RootSessionID: "s", Kind: protocol.KindReadTextFile,
		Args: protocol.PathArgs{Path: filepath.Join(ws, "r.txt")}, TimeoutMs: 60000})

	if r, err := l.Ledger.WaitResult(ctx, rid); err != nil || r.Outcome.Kind() != protocol.OutcomeRead {
		t.Fatalf("the read behind a waiting write: %+v %v", r, err)
	}
	if v := sc.View(); v.State != nexting.DevicePending {
		t.Fatalf("the write no longer waits: %+v", v)
	}
	sc.Press(nexting.ChoiceAllow)
	if r, err := l.Ledger.WaitResult(ctx, wid); err != nil || r.Outcome.Kind() != protocol.OutcomeWrite {
		t.Fatalf("the write: %+v %v", r, err)
	}
	if b, err := os.ReadFile(outside); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("written %d bytes, %v", len(b), err)
	}
}
