package approve_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/syncbuf"
	"github.com/sema-agent/sema/nexting"
	"github.com/sema-agent/sema/nexting/bleadapter"
	"github.com/sema-agent/sema/protocol"
)

var _ executor.Gate = (*approve.Gate)(nil)

var epoch = time.Unix(1_700_000_000, 0)

// runner records what the gate let run.
type runner struct {
	calls atomic.Int32
	mu    sync.Mutex
	req   ops.Request
}

func (r *runner) run(req ops.Request) protocol.Outcome {
	r.calls.Add(1)
	r.mu.Lock()
	r.req = req
	r.mu.Unlock()
	return protocol.ExecOutcome{ExitCode: 0}
}

// gated runs req through g in the background; the result arrives on the
// channel.
func gated(ctx context.Context, g *approve.Gate, req ops.Request, r *runner) <-chan protocol.Outcome {
	out := make(chan protocol.Outcome, 1)
	go func() { out <- g.Run(ctx, req, r.run) }()
	return out
}

func wait(ctx context.Context, t *testing.T, ch <-chan protocol.Outcome) protocol.Outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-ctx.Done():
		t.Fatal("the gate never answered")
	}
	return nil
}

func wantDenied(t *testing.T, o protocol.Outcome, word string) {
	t.Helper()
	f, ok := o.(protocol.Failure)
	if !ok || f.ErrorCode != protocol.ErrPermissionDenied || !strings.Contains(f.Message, word) || !strings.Contains(f.Message, "not run") {
		t.Fatalf("outcome %+v, want permission_denied mentioning %q", o, word)
	}
}

func TestGateDecisions(t *testing.T) {
	ws := t.TempDir()
	cases := []struct {
		name string
		act  func(t *testing.T, fc *gateClock, sc *nexting.SimConn, cancel context.CancelCauseFunc, g *approve.Gate)
		want func(t *testing.T, o protocol.Outcome, r *runner)
	}{
		{"allow", func(t *testing.T, fc *gateClock, sc *nexting.SimConn, _ context.CancelCauseFunc, _ *approve.Gate) {
			fc.Advance(3 * time.Second) // the person takes 3 s
			if !sc.Press(nexting.ChoiceAllow) {
				t.Fatal("allow was not sent")
			}
		}, func(t *testing.T, o protocol.Outcome, r *runner) {
			if _, ok := o.(protocol.ExecOutcome); !ok || r.calls.Load() != 1 {
				t.Fatalf("outcome %+v after %d runs", o, r.calls.Load())
			}
			if r.req.Timeout != 57*time.Second { // the 3 s of the approval came off timeoutMs
				t.Fatalf("ran with timeout %v, want 57s", r.req.Timeout)
			}
		}},
		{"deny", func(t *testing.T, _ *gateClock, sc *nexting.SimConn, _ context.CancelCauseFunc, _ *approve.Gate) {
			sc.Press(nexting.ChoiceDeny)
		}, func(t *testing.T, o protocol.Outcome, r *runner) { wantDenied(t, o, "denied") }},
		{"expiry", func(t *testing.T, fc *gateClock, _ *nexting.SimConn, _ context.CancelCauseFunc, _ *approve.Gate) {
			fc.advancePast(testCtx(t), t, 30*time.Second) // half of the 60 s timeout
		}, func(t *testing.T, o protocol.Outcome, r *runner) { wantDenied(t, o, "expired") }},
		{"lost device", func(t *testing.T, _ *gateClock, sc *nexting.SimConn, _ context.CancelCauseFunc, _ *approve.Gate) {
			sc.Close()
		}, func(t *testing.T, o protocol.Outcome, r *runner) { wantDenied(t, o, "lost") }},
		{"server cancel", func(t *testing.T, _ *gateClock, _ *nexting.SimConn, cancel context.CancelCauseFunc, _ *approve.Gate) {
			cancel(ops.ErrCancelled)
		}, func(t *testing.T, o protocol.Outcome, r *runner) {
			if c, ok := o.(protocol.CancelledOutcome); !ok || c.State != protocol.CancelNotStarted {
				t.Fatalf("outcome %+v, want cancelled not_started", o)
			}
		}},
		{"fence or shutdown", func(t *testing.T, _ *gateClock, _ *nexting.SimConn, cancel context.CancelCauseFunc, _ *approve.Gate) {
			cancel(errors.New("the executor is shutting down"))
		}, func(t *testing.T, o protocol.Outcome, r *runner) {
			wantDenied(t, o, "withdrawn: the executor is shutting down")
		}},
		{"gate closed", func(t *testing.T, _ *gateClock, _ *nexting.SimConn, _ context.CancelCauseFunc, g *approve.Gate) {
			g.Close()
		}, func(t *testing.T, o protocol.Outcome, r *runner) { wantDenied(t, o, "cancelled") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			fc := clock.NewFake(epoch)
			d := newSimDevice(t, fc, nil)
			g := newGate(t, d, ws, nil)
			sc := d.next(ctx)
			ictx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			r := &runner{}
			ch := gated(ictx, g, execReq("git push origin main"), r)
			v := waitView(ctx, t, sc, "the request", pending)
			if v.Summary != "Run: git push origin main" || v.Remaining != 30*time.Second {
				t.Fatalf("shown %q for %v", v.Summary, v.Remaining)
			}
			c.act(t, d.gclk, sc, cancel, g)
			o := wait(ctx, t, ch)
			c.want(t, o, r)
			if c.name != "allow" && r.calls.Load() != 0 {
				t.Fatal("the instruction ran without allow")
			}
		})
	}
}

// An instruction the policy does not name runs at once; nothing is shown.
func TestGatePassesWhatThePolicyDoesNotName(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	d := newSimDevice(t, fc, nil)
	ws := t.TempDir()
	g := newGate(t, d, ws, nil)
	sc := d.next(ctx)
	r := &runner{}
	req := writeReq(protocol.KindWriteFile, ws+"/inside.txt")
	req.Timeout = time.Minute
	if o := g.Run(ctx, req, r.run); o.Kind() != protocol.OutcomeExec || r.calls.Load() != 1 || r.req.Timeout != time.Minute {
		t.Fatalf("outcome %+v, %d runs, timeout %v", o, r.calls.Load(), r.req.Timeout)
	}
	if v := sc.View(); v.State != nexting.DeviceIdle {
		t.Fatalf("the device shows %+v", v)
	}
}

// Without a device, an instruction needing approval waits for one within
// its TTL, then is refused; one that connects in time is asked.
func TestGateWithoutDevice(t *testing.T) {
	ctx := testCtx(t)
	fc := watch(clock.NewFake(epoch))
	ws := t.TempDir()
	tg, err := approve.ParseTarget("unix:"+t.TempDir()+"/nobody.sock", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := approve.New(approve.Config{WorkspaceRoot: ws, Device: tg.String(), Dial: tg.Dial, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := &runner{}
	req := execReq("ls")
	req.Timeout = 10 * time.Second
	ch := gated(ctx, g, req, r)
	fc.advancePast(ctx, t, 5*time.Second) // the wait for a device: the TTL, half of timeoutMs
	wantDenied(t, wait(ctx, t, ch), "no approval device is connected")
	if r.calls.Load() != 0 {
		t.Fatal("ran without a device")
	}
}

func TestGateRefusesWithoutTime(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	d := newSimDevice(t, fc, nil)
	g := newGate(t, d, t.TempDir(), nil)
	r := &runner{}
	req := execReq("ls")
	req.Timeout = time.Millisecond
	wantDenied(t, g.Run(ctx, req, r.run), "leaves no time")
	if r.calls.Load() != 0 {
		t.Fatal("ran")
	}
}

// A device that shows too little of a summary is never asked.
func TestGateRefusesATinyDisplay(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	info := []byte(`{"protocol":"nexting-device","spec":"0.2.0","wire":[1],"profiles":["approval/1"],"model":"tiny","fw":"1","max_message_bytes":512,"max_summary_bytes":16}`)
	d := newSimDevice(t, fc, info)
	g := newGate(t, d, t.TempDir(), nil)
	r := &runner{}
	wantDenied(t, g.Run(ctx, execReq("ls"), r.run), "too few")
}

// Concurrent approvals are shown one at a time, in order; each is answered
// on its own.
func TestGateQueuesApprovals(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	d := newSimDevice(t, fc, nil)
	g := newGate(t, d, t.TempDir(), nil)
	sc := d.next(ctx)
	r1, r2 := &runner{}, &runner{}
	ch1 := gated(ctx, g, execReq("first"), r1)
	v := waitView(ctx, t, sc, "the first request", pending)
	if v.Summary != "Run: first" {
		t.Fatalf("first shown: %q", v.Summary)
	}
	ch2 := gated(ctx, g, execReq("second"), r2)
	sc.Press(nexting.ChoiceDeny)
	wantDenied(t, wait(ctx, t, ch1), "denied")
	v = waitView(ctx, t, sc, "the second request", func(v nexting.SimView) bool { return pending(v) && v.Summary == "Run: second" })
	sc.Press(nexting.ChoiceAllow)
	if o := wait(ctx, t, ch2); o.Kind() != protocol.OutcomeExec || r1.calls.Load() != 0 || r2.calls.Load() != 1 {
		t.Fatalf("second: %+v; runs %d, %d", o, r1.calls.Load(), r2.calls.Load())
	}
}

// status/1: the slots mirror the instructions in flight — needs_input
// while one waits for approval, working while it runs — and clear after.
func TestGateMirrorsStatus(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	d := newSimDevice(t, fc, nil)
	ws := t.TempDir()
	g := newGate(t, d, ws, nil)
	sc := d.next(ctx)

	release := make(chan struct{})
	started := make(chan struct{})
	slow := func(req ops.Request) protocol.Outcome {
		close(started)
		<-release
		return protocol.ExecOutcome{}
	}
	out := make(chan protocol.Outcome, 1)
	go func() { out <- g.Run(ctx, execReq("make deploy"), slow) }()
	waitView(ctx, t, sc, "the request", pending)
	fc.Advance(approve.StatusInterval)
	waitView(ctx, t, sc, "needs_input", func(v nexting.SimView) bool {
		return len(v.Status) == 1 && v.Status[0].State == nexting.AgentNeedsInput && v.Status[0].Label == "Run: make deploy"
	})
	sc.Press(nexting.ChoiceAllow)
	<-started
	fc.Advance(approve.StatusInterval)
	waitView(ctx, t, sc, "working", func(v nexting.SimView) bool {
		return len(v.Status) == 1 && v.Status[0].State == nexting.AgentWorking
	})
	close(release)
	wait(ctx, t, out)
	fc.Advance(approve.StatusInterval)
	waitView(ctx, t, sc, "cleared slots", func(v nexting.SimView) bool { return len(v.Status) == 0 })
}

// After the device went away, the gate connects again after
// RetryInterval and asks the new connection.
func TestGateReconnects(t *testing.T) {
	ctx := testCtx(t)
	fc := clock.NewFake(epoch)
	d := newSimDevice(t, fc, nil)
	g := newGate(t, d, t.TempDir(), nil)
	d.next(ctx).Close()
	d.gclk.advancePast(ctx, t, 2*time.Second) // RetryInterval
	sc := d.next(ctx)
	if err := g.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	r := &runner{}
	ch := gated(ctx, g, execReq("ls"), r)
	waitView(ctx, t, sc, "the request", pending)
	sc.Press(nexting.ChoiceAllow)
	if o := wait(ctx, t, ch); o.Kind() != protocol.OutcomeExec {
		t.Fatalf("%+v", o)
	}
}

func TestTargets(t *testing.T) {
	for _, bad := range []string{"", "unix:", "unix:relative.sock", "tcp:127.0.0.1:1", "nocolon"} {
		if _, err := approve.ParseTarget(bad, bleadapter.Host{}); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"serial:ttyACM0", "serial:/dev/ttyACM0@fast", "serial:/dev/ttyACM0@0"} {
		if _, err := approve.ParseTarget(bad, bleadapter.Host{}); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
	for bad, says := range map[string]string{
		"ble:AA:BB:CC:DD:EE":    "six two-digit hex bytes",
		"ble:AA-BB-CC-DD-EE-FF": "colon at position 3",
		"ble:hci0":              "six two-digit hex bytes",
		"ble:6eadc0de-0001-4a21-9c5e-1b7f3d9e42a0": "macOS",
	} {
		if _, err := approve.ParseTarget(bad, bleadapter.Host{}); err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTarget(%q): %v; want an error naming it and saying %q", bad, err, says)
		}
	}
	tg, err := approve.ParseTarget("ble:aa:bb:cc:dd:ee:ff", bleadapter.Host{})
	if err != nil || tg.String() != "ble:AA:BB:CC:DD:EE:FF" {
		t.Fatalf("%v %v", tg, err)
	}
	if _, err := tg.Dial(t.Context()); err == nil {
		t.Error("dialed a BLE device as a byte stream")
	}
	if bleadapter.Supported {
		if err := tg.Available(); err != nil {
			t.Errorf("%s: %v", tg, err)
		}
		return
	}
	if err := tg.Available(); !errors.Is(err, approve.ErrNotAvailable) || !strings.Contains(err.Error(), "not available in this build") {
		t.Errorf("%s: %v", tg, err)
	}
	if _, err := tg.Open(t.Context(), nexting.SessionConfig{}); !errors.Is(err, approve.ErrNotAvailable) {
		t.Errorf("%s opened: %v", tg, err)
	}
}

// Opening a BLE device where there is no Bluetooth (no system D-Bus, as on
// the machine these tests were written on; forced here so that a machine
// with BlueZ is never touched) fails at once with an error that says so.
func TestOpenBLEWithoutBluetooth(t *testing.T) {
	if !bleadapter.Supported {
		t.Skip("no Bluetooth LE in this build (TestTargets checks the refusal)")
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+t.TempDir()+"/no-system-bus")
	tg, err := approve.ParseTarget("ble:AA:BB:CC:DD:EE:FF", bleadapter.Host{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = tg.Open(ctx, nexting.SessionConfig{})
	if !errors.Is(err, bleadapter.ErrNoAdapter) || !strings.HasPrefix(err.Error(), "approval device ble:AA:BB:CC:DD:EE:FF: no Bluetooth adapter: ") ||
		!strings.Contains(err.Error(), "D-Bus") {
		t.Fatalf("Open: %v", err)
	}
}

// The gate over Config.Open with a BLE target and no Bluetooth: it keeps
// retrying in the background, logs why, and an instruction needing
// approval is refused when its wait for a device ends.
func TestGateBLEWithoutBluetooth(t *testing.T) {
	if !bleadapter.Supported {
		t.Skip("no Bluetooth LE in this build")
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+t.TempDir()+"/no-system-bus")
	ctx := testCtx(t)
	fc := watch(clock.NewFake(epoch))
	tg, err := approve.ParseTarget("ble:AA:BB:CC:DD:EE:FF", bleadapter.Host{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	g, err := approve.New(approve.Config{WorkspaceRoot: t.TempDir(), Device: tg.String(), Open: tg.Open,
		ConnectTimeout: tg.ConnectTimeout(), Clock: fc, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	fc.advancePast(ctx, t, 2*time.Second) // the first attempt failed (and was logged); the second starts
	r := &runner{}
	req := execReq("ls")
	req.Timeout = 10 * time.Second
	ch := gated(ctx, g, req, r)
	fc.advancePast(ctx, t, 5*time.Second)
	wantDenied(t, wait(ctx, t, ch), "no approval device is connected (ble:AA:BB:CC:DD:EE:FF)")
	if r.calls.Load() != 0 {
		t.Fatal("ran without a device")
	}
	g.Close()
	if out := logs.String(); !strings.Contains(out, "cannot connect to the approval device") || !strings.Contains(out, "no Bluetooth adapter") {
		t.Fatalf("logs: %s", out)
	}
}

// A write waiting for approval takes its payload frames as they come (the
// executor's socket reader must never wait on a person), and after allow
// the op reads all of them, in order, then the end.
func TestGateHoldsThePayloadOfAWaitingWrite(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprint("allow=", allow), func(t *testing.T) {
			ctx := testCtx(t)
			fc := clock.NewFake(epoch)
			d := newSimDevice(t, fc, nil)
			g := newGate(t, d, t.TempDir(), nil)
			sc := d.next(ctx)
			src := make(chan *protocol.Payload, 1)
			req := writeReq(protocol.KindWriteFile, "/outside/f")
			req.Payload = src
			got := make(chan []int64, 1)
			out := make(chan protocol.Outcome, 1)
			go func() {
				out <- g.Run(ctx, req, func(r ops.Request) protocol.Outcome {
					var offs []int64
					for p := range r.Payload {
						offs = append(offs, p.Offset)
					}
					got <- offs
					return protocol.WriteOutcome{CanonicalPath: "/outside/f"}
				})
			}()
			waitView(ctx, t, sc, "the request", pending)
			for i := range 20 { // far more than the channel holds: sent while the person decides
				select {
				case src <- &protocol.Payload{Offset: int64(i), Data: []byte("x")}:
				case <-ctx.Done():
					t.Fatalf("frame %d blocked while the write waited for approval", i)
				}
			}
			close(src)
			if allow {
				sc.Press(nexting.ChoiceAllow)
				offs := <-got
				if len(offs) != 20 || offs[0] != 0 || offs[19] != 19 {
					t.Fatalf("the op read %v", offs)
				}
				if o := wait(ctx, t, out); o.Kind() != protocol.OutcomeWrite {
					t.Fatalf("%+v", o)
				}
			} else {
				sc.Press(nexting.ChoiceDeny)
				wantDenied(t, wait(ctx, t, out), "denied")
			}
		})
	}
}

// Without a Bluetooth transport (a program that links none), a ble target
// is refused as not available in this build, naming the target.
func TestABLETargetNeedsATransport(t *testing.T) {
	_, err := approve.ParseTarget("ble:AA:BB:CC:DD:EE:FF", nil)
	if !errors.Is(err, approve.ErrNotAvailable) || !strings.Contains(err.Error(), "ble:AA:BB:CC:DD:EE:FF") {
		t.Fatalf("ParseTarget without a transport: %v", err)
	}
	if _, err := approve.ParseTarget("unix:/run/approve.sock", nil); err != nil {
		t.Fatalf("a unix target needs no transport: %v", err)
	}
}
