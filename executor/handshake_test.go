package executor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

func TestHelloIsSignedSmallAndHonest(t *testing.T) {
	h := newHarness(t)
	c, err := h.lane.Next(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if !c.SignatureOK {
		t.Fatal("the hello signature does not verify over HelloSignaturePayload with the device's public key")
	}
	hello := c.Hello
	if c.HelloBytes >= protocol.MaxPreAuthFrameBytes {
		t.Errorf("hello is %d bytes, not under %d", c.HelloBytes, protocol.MaxPreAuthFrameBytes)
	}
	if hello.DeviceID != h.deviceID || hello.ProtocolVersion != protocol.ProtocolVersion || hello.PathFlavor != "posix" ||
		hello.WorkspaceRoot != h.ws || hello.Platform.OS != runtime.GOOS || hello.Platform.Arch != runtime.GOARCH || hello.Resuming != nil {
		t.Errorf("hello %+v", hello)
	}
	if hello.Epoch != h.rt.Epoch() || !protocol.ValidULID(hello.Epoch) {
		t.Errorf("epoch %q", hello.Epoch)
	}
	want := []protocol.InstructionKind{protocol.KindExec, protocol.KindExecStream}
	want = append(want, ops.FileKinds(&ops.Env{})...)
	got := hello.Supports
	if !sameSet(got, want) {
		t.Errorf("supports %v, want exec, execStream and ops.FileKinds %v", got, want)
	}
	if slices.Contains(got, protocol.KindStatBatch) {
		t.Error("supports declares statBatch")
	}
	if err := c.Handshake(h.ctx(), 7, hbMs, nil, nil); err != nil {
		t.Fatal(err)
	}
	// The status file says connected, mode 0600.
	st := h.waitStatus(func(st executor.Status) bool { return st.Connected })
	if st.Gen != "7" || st.DeviceID != h.deviceID || st.Epoch != hello.Epoch {
		t.Errorf("status %+v", st)
	}
	if fi, err := os.Stat(h.status); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("status file mode: %v %v", fi.Mode(), err)
	}

	// A reconnect of the same process: the same epoch, the same supports,
	// a fresh nonce signed anew, and resuming set.
	c2 := h.reconnect(c, 8, nil, nil)
	if c2.Hello.Epoch != hello.Epoch || !slices.Equal(c2.Hello.Supports, got) || c2.Nonce == c.Nonce || !c2.SignatureOK || c2.Hello.Resuming == nil {
		t.Errorf("reconnect hello %+v", c2.Hello)
	}
}

func sameSet[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// A lane that does not know the key answers auth_failed; the executor backs
// off and tries again, never faster than the backoff.
func TestWrongKeyIsAuthFailedAndRetried(t *testing.T) {
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	h := startHarness(t, other)
	c, err := h.lane.Next(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if c.SignatureOK {
		t.Fatal("a signature verified under another key")
	}
	c.Reject(protocol.RejectAuthFailed, nil)
	d := h.advanceBackoff()
	if d != time.Second {
		t.Errorf("first backoff %v, want 1s", d)
	}
	if _, err := h.lane.Next(h.ctx()); err != nil {
		t.Fatal(err)
	}
}

// Every helloReject code (§1.4) and its reaction.
func TestHelloRejectCodes(t *testing.T) {
	min2 := 2
	for _, code := range protocol.HelloRejectCodes() {
		t.Run(string(code), func(t *testing.T) {
			h := newHarness(t)
			c, err := h.lane.Next(h.ctx())
			if err != nil {
				t.Fatal(err)
			}
			c.Reject(code, &min2)
			switch code {
			case protocol.RejectRevoked:
				if err := h.runErr(); !errors.Is(err, executor.ErrRevoked) {
					t.Fatalf("Run: %v, want ErrRevoked", err)
				}
			case protocol.RejectProtocolVersionUnsupported:
				var up *executor.UpgradeRequiredError
				if err := h.runErr(); !errors.As(err, &up) || up.Min == nil || *up.Min != 2 {
					t.Fatalf("Run: %v, want UpgradeRequiredError{Min: 2}", err)
				}
			default: // auth_failed, draining, already_connected: back off, retry
				h.clock.WaitTimer(h.ctx(), isBackoff)
				if n := h.lane.Dials(); n != 1 {
					t.Fatalf("%d dials before the backoff elapsed", n)
				}
				h.advanceBackoff()
				c2, err := h.lane.Next(h.ctx())
				if err != nil {
					t.Fatal(err)
				}
				if err := c2.Handshake(h.ctx(), 1, hbMs, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			if code == protocol.RejectRevoked || code == protocol.RejectProtocolVersionUnsupported {
				if n := h.lane.Dials(); n != 1 {
					t.Errorf("%d dials after a terminal reject, want 1", n)
				}
			}
		})
	}
}

// The backoff is exponential from 1 s, capped at 60 s, jittered within
// [c/2, c]; a successful hello resets it.
func TestBackoffGrowsToTheCapAndResets(t *testing.T) {
	h := newHarness(t)
	var got []time.Duration
	for range 9 {
		c, err := h.lane.Next(h.ctx())
		if err != nil {
			t.Fatal(err)
		}
		c.Reject(protocol.RejectAlreadyConnected, nil)
		got = append(got, h.advanceBackoff())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i, d := range got {
		c := want[i] * time.Second
		if d < c/2 || d > c || d < time.Second {
			t.Errorf("attempt %d waited %v, want within [%v, %v]", i, d, c/2, c)
		}
	}
	c := h.connect(1, nil, nil)
	c.Close()
	if d := h.advanceBackoff(); d != time.Second {
		t.Errorf("after a successful hello the backoff is %v, want 1s", d)
	}
	h.connect(2, nil, nil)
}

// The bye reasons of R13.
func TestByeReasons(t *testing.T) {
	for _, reason := range protocol.ByeReasons() {
		t.Run(string(reason), func(t *testing.T) {
			h := newHarness(t)
			c := h.connect(1, nil, nil)
			c.AutoAck(true)
			id := newID()
			c.Send(execIn(1, id, "echo $$; exec sleep 1000", 0))
			pid := h.pidOf(id)
			c.Bye(reason)
			switch reason {
			case protocol.ByeRevoked, protocol.ByeSuperseded:
				want := executor.ErrRevoked
				if reason == protocol.ByeSuperseded {
					want = executor.ErrSuperseded
				}
				if err := h.runErr(); !errors.Is(err, want) {
					t.Fatalf("Run: %v, want %v", err, want)
				}
				// Terminal: the work was killed before Run returned.
				if alive(pid) {
					t.Errorf("the command (pid %d) outlived a terminal bye", pid)
				}
				if n := h.lane.Dials(); n != 1 {
					t.Errorf("%d dials after a terminal bye", n)
				}
			case protocol.ByeDraining:
				// Reconnect with the same epoch; the work keeps running and
				// resumes under the new gen.
				h.advanceBackoff()
				c2 := h.connect(2, []string{id}, map[string]int64{id: h.lane.Ledger.Stream(id).Contiguous})
				if c2.Hello.Epoch != c.Hello.Epoch {
					t.Error("a new epoch after draining")
				}
				if !alive(pid) {
					t.Fatalf("listed work (pid %d) did not survive a draining reconnect", pid)
				}
				c2.AutoAck(true)
				c2.Send(&protocol.Cancel{Gen: 2, InstructionID: id})
				r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
				if err != nil {
					t.Fatal(err)
				}
				if r.Conn != c2.N || outcomeOf(t, r) != "cancelled:killed" {
					t.Errorf("result %+v", r)
				}
			}
		})
	}
}

var _ = context.Background
