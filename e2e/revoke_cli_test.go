package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/syncbuf"
	"github.com/sema-agent/sema/protocol"
)

// Revocation through the user plane, with the executor run as `sema device
// serve` (in-process): bye revoked, the running command killed and settled
// outcome_unknown, serve exits 3, the key is deleted and the record marked
// revoked (R13); a second serve refuses to start. Nothing of the command's
// output reaches the log.
func TestRevocationDeletesTheKey(t *testing.T) {
	e := newEnv(t)
	stderr := &syncbuf.Buffer{}
	oldOut, oldErr := cli.Stdout, cli.Stderr
	cli.Stdout, cli.Stderr = stderr, stderr
	t.Cleanup(func() { cli.Stdout, cli.Stderr = oldOut, oldErr })

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- cli.Run(ctx, []string{"device", "serve", "--state-dir", e.stateDir}) }()
	exited := false
	defer func() {
		if !exited {
			cancel()
			<-code
		}
	}()
	eventually(t, "serve is online", func() bool { return e.srv.Presence(e.deviceID).Online })

	fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
	const secret = "output-that-must-not-be-logged"
	var a = e.dispatch(execInstr(fx.cmd("a", "echo "+secret+"; "+pf.longRunning(g))))
	// The generation may still be waiting for generationAck: the dispatch
	// is queued until it opens.
	pids := pf.waitPids(t)
	e.revoke()
	if o := collect(t, e.ctx, a); o.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("A settled %v", o)
	}
	var c int
	select {
	case c = <-code:
		exited = true
	case <-ctx.Done():
		t.Fatal("serve did not exit")
	}
	if c != cli.ExitRevoked {
		t.Fatalf("serve exited %d, want %d; stderr:\n%s", c, cli.ExitRevoked, stderr.String())
	}
	if live := anyAlive(pids); len(live) > 0 {
		t.Fatalf("serve exited with %v alive", live)
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, device.KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the key is still there: %v", err)
	}
	rec, err := device.LoadRecord(e.stateDir)
	if err != nil || rec.RevokedAt == nil {
		t.Fatalf("the record is not marked revoked: %+v %v", rec, err)
	}
	if strings.Contains(stderr.String(), secret) {
		t.Fatal("command output reached the log")
	}
	// Serve again: it refuses before dialing.
	if c := cli.Run(e.ctx, []string{"device", "serve", "--state-dir", e.stateDir}); c != cli.ExitRevoked {
		t.Fatalf("a second serve exited %d", c)
	}
	g.open(t)
	if fx.starts("a") != 1 || fx.ends("a") != 0 {
		t.Fatalf("A %d/%d", fx.starts("a"), fx.ends("a"))
	}
}
