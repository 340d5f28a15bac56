package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// helloAckOf returns the helloAck the proxy forwarded for the lane's current
// generation.
func (e *env) helloAckOf() frame {
	e.t.Helper()
	gen := e.srv.Presence(e.deviceID).Gen.String()
	for _, f := range e.px.frames() {
		if f.Dir == toDevice && f.T == "helloAck" && f.Gen == gen {
			return f
		}
	}
	e.t.Fatalf("no helloAck for generation %s", gen)
	return frame{}
}

// After the fence of a same-epoch reconnect (§1.5, R2, R10), the listed
// instruction keeps running and the unlisted one is dead — its shell and
// its background child — by the time generationAck reaches the lane.
func TestFenceKeepsTheListedAndKillsTheRest(t *testing.T) {
	e := newEnv(t, func(c *lane.Config) { c.CancelGrace = 300 * time.Millisecond })
	e.startExecutor()
	e.online()
	fx := e.sidefx("fx")
	ga, gb := e.gate("a"), e.gate("b")
	pa, pb := e.pidFile("a"), e.pidFile("b")
	a := e.dispatch(execInstr(fx.cmd("a", pa.longRunning(ga))))
	b := e.dispatch(execInstr(fx.cmd("b", pb.longRunning(gb))))
	pidsA, pidsB := pa.waitPids(t), pb.waitPids(t)

	// The lane writes A off while the device runs it: A's cancel is
	// swallowed, so the cancel grace (R11) settles it outcome_unknown.
	e.px.setFault(func(f *frame) action {
		if f.Dir == toDevice && f.T == "cancel" && f.ID == a.ID {
			return drop
		}
		return forward
	})
	a.Cancel()
	oa := collect(t, e.ctx, a)
	if oa.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("A settled %v, want outcome_unknown from the cancel grace", oa)
	}
	if live := anyAlive(pidsA); len(live) != len(pidsA) {
		t.Fatalf("A should still run on the device before the fence; alive: %v of %v", live, pidsA)
	}

	// Drop the socket: the reconnect lists B and not A.
	e.px.cutAll()
	e.online()
	if ack := e.helloAckOf(); !slices.Equal(ack.Pending, []string{b.ID}) {
		t.Fatalf("pendingInstructions %v, want [%s]", ack.Pending, b.ID)
	}
	if live := anyAlive(pidsA); len(live) > 0 {
		t.Fatalf("after the fence, the unlisted instruction's processes %v are alive", live)
	}
	if live := anyAlive(pidsB); len(live) != len(pidsB) {
		t.Fatalf("the listed instruction was killed by the fence: alive %v of %v", live, pidsB)
	}
	gb.open(t)
	ob := collect(t, e.ctx, b)
	if !ob.ok() || fx.starts("b") != 1 || fx.ends("b") != 1 {
		t.Fatalf("B: %v, started %d, ended %d", ob, fx.starts("b"), fx.ends("b"))
	}
	if fx.starts("a") != 1 || fx.ends("a") != 0 {
		t.Fatalf("A started %d, ended %d", fx.starts("a"), fx.ends("a"))
	}
	ga.open(t)
	e.checkFramesOnce()
}

// No reconnect within the grace closes the books (R4): the instruction
// settles outcome_unknown, the late reconnect does not list it, and the
// fence kills it before generationAck.
func TestReconnectGraceExpires(t *testing.T) {
	e := newEnv(t, func(c *lane.Config) { c.ReconnectGrace = 300 * time.Millisecond })
	e.startExecutor()
	e.online()
	fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
	a := e.dispatch(execInstr(fx.cmd("a", pf.longRunning(g))))
	pids := pf.waitPids(t)
	e.px.block()
	e.px.cutAll()
	oa := collect(t, e.ctx, a)
	if oa.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("A settled %v, want outcome_unknown after the grace", oa)
	}
	if len(anyAlive(pids)) != len(pids) {
		t.Fatal("the executor stopped A before it reconnected")
	}
	e.px.unblock()
	e.online()
	if ack := e.helloAckOf(); len(ack.Pending) != 0 {
		t.Fatalf("pendingInstructions %v after the grace", ack.Pending)
	}
	if live := anyAlive(pids); len(live) > 0 {
		t.Fatalf("after the fence, %v are alive", live)
	}
	g.open(t)
	if o := e.run(execInstr(fx.cmd("b", ""))); !o.ok() {
		t.Fatalf("the next instruction: %v", o)
	}
	if fx.starts("a") != 1 || fx.ends("a") != 0 || e.framesFor(a.ID) != 1 {
		t.Fatalf("A started %d, ended %d, %d frames", fx.starts("a"), fx.ends("a"), e.framesFor(a.ID))
	}
	e.checkFramesOnce()
}

// The executor restarts (a new Runtime: a new epoch, R3) with an instruction
// in flight: the lane settles it outcome_unknown before helloAck, and the
// new process never runs it. Whatever the old process held dies with it.
func TestExecutorRestart(t *testing.T) {
	t.Run("while running", func(t *testing.T) {
		e := newEnv(t)
		r1 := e.startExecutor()
		e.online()
		fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
		a := e.dispatch(execInstr(fx.cmd("a", pf.longRunning(g))))
		pids := pf.waitPids(t)
		e.px.block()
		e.px.cutAll()
		if err := e.stopRunner(r1); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if live := anyAlive(pids); len(live) > 0 {
			t.Fatalf("Run returned with %v alive", live)
		}
		r2 := e.startExecutor()
		if r2.rt.Epoch() == r1.rt.Epoch() {
			t.Fatal("the new process has the old epoch")
		}
		e.px.unblock()
		oa := collect(t, e.ctx, a)
		if oa.code() != protocol.ErrOutcomeUnknown {
			t.Fatalf("A settled %v, want outcome_unknown (R3)", oa)
		}
		e.online()
		if ack := e.helloAckOf(); len(ack.Pending) != 0 {
			t.Fatalf("pendingInstructions %v for a new epoch", ack.Pending)
		}
		g.open(t)
		if o := e.run(execInstr(fx.cmd("b", ""))); !o.ok() || fx.starts("b") != 1 {
			t.Fatalf("the next instruction: %v", o)
		}
		if fx.starts("a") != 1 || fx.ends("a") != 0 || e.framesFor(a.ID) != 1 {
			t.Fatalf("A started %d, ended %d, %d frames", fx.starts("a"), fx.ends("a"), e.framesFor(a.ID))
		}
		e.checkFramesOnce()
	})

	// The old process's answers never reach the lane: at the fault the
	// proxy is blocked, so the next socket is the new process's. A is the
	// only instruction in flight, so its frames are matched by type.
	cases := []struct {
		name    string
		match   func(*frame) bool
		ran     bool // A ran on the old process
		settled bool // the lane had A's answer before the restart
	}{
		{"the instruction frame lost", is(toDevice, "instruction"), false, false},
		{"the exit chunk lost", func(f *frame) bool { return f.Dir == toLane && f.T == "chunk" && f.Kind == "exit" }, true, false},
		{"the result lost", is(toLane, "result"), true, false},
		{"the resultAck lost", is(toDevice, "resultAck"), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r1 := e.startExecutor()
			e.online()
			fx := e.sidefx("fx")
			e.px.setFault(func() fault {
				inner := once(tc.match, cutBefore)
				return func(f *frame) action {
					act := inner(f)
					if act != forward {
						e.px.block()
					}
					return act
				}
			}())
			a := e.dispatch(execInstr(fx.cmd("a", "echo out")))
			eventually(t, "the cut", func() bool { return e.px.cutCount() > 0 })
			e.px.setFault(nil)
			if err := e.stopRunner(r1); err != nil {
				t.Fatalf("Run: %v", err)
			}
			e.startExecutor()
			e.px.unblock()
			oa := collect(t, e.ctx, a)
			if tc.settled {
				if !oa.ok() || oa.stdout() != "out\n" {
					t.Fatalf("A settled %v", oa)
				}
			} else if oa.code() != protocol.ErrOutcomeUnknown {
				t.Fatalf("A settled %v, want outcome_unknown (R3)", oa)
			}
			want := 0
			if tc.ran {
				want = 1
			}
			e.online()
			if o := e.run(execInstr(fx.cmd("b", ""))); !o.ok() {
				t.Fatalf("the next instruction: %v", o)
			}
			if fx.starts("a") != want || fx.ends("a") != want || e.framesFor(a.ID) != 1 {
				t.Fatalf("A started %d, ended %d (want %d), %d frames", fx.starts("a"), fx.ends("a"), want, e.framesFor(a.ID))
			}
			e.checkFramesOnce()
		})
	}

	t.Run("in the middle of a payload", func(t *testing.T) {
		e := newEnv(t)
		r1 := e.startExecutor()
		e.online()
		path := filepath.Join(e.ws, "file.bin")
		e.px.setFault(func() fault {
			inner := nth(3, func(f *frame) bool { return f.T == "payload" && f.Part == "chunk" }, cutAfter)
			return func(f *frame) action {
				act := inner(f)
				if act != forward {
					e.px.block()
				}
				return act
			}
		}())
		data := content(64 << 10)
		a := e.dispatch(writeInstr(path, data))
		eventually(t, "the cut", func() bool { return e.px.cutCount() > 0 })
		if err := e.stopRunner(r1); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if landed := checkWrite(t, path, data, nil); landed {
			t.Fatal("a write whose payload was cut landed")
		}
		e.startExecutor()
		e.px.unblock()
		oa := collect(t, e.ctx, a)
		if oa.code() != protocol.ErrOutcomeUnknown {
			t.Fatalf("the write settled %v, want outcome_unknown (R3)", oa)
		}
		e.online()
		if o := e.run(writeInstr(path, data)); !o.ok() || !checkWrite(t, path, data, nil) {
			t.Fatalf("the next write: %v", o)
		}
		e.checkFramesOnce()
	})

	// A graceful stop (R15) while an instruction runs: goodbye, the grace,
	// then the work is stopped and answered honestly; a new process starts
	// clean.
	t.Run("a graceful stop", func(t *testing.T) {
		e := newEnv(t)
		r1 := e.startExecutor()
		e.online()
		fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
		a := e.dispatch(execInstr(fx.cmd("a", pf.longRunning(g))))
		pids := pf.waitPids(t)
		if err := e.stopRunner(r1); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if live := anyAlive(pids); len(live) > 0 {
			t.Fatalf("Run returned with %v alive", live)
		}
		oa := collect(t, e.ctx, a)
		if oa.ok() || (oa.code() != protocol.ErrAborted && oa.code() != protocol.ErrOutcomeUnknown) {
			t.Fatalf("A settled %v, want aborted or outcome_unknown", oa)
		}
		if n := e.px.count(func(f frame) bool { return f.Dir == toLane && f.T == "goodbye" }); n != 1 {
			t.Fatalf("%d goodbyes", n)
		}
		e.startExecutor()
		e.online()
		g.open(t)
		if o := e.run(execInstr(fx.cmd("b", ""))); !o.ok() {
			t.Fatalf("the next instruction: %v", o)
		}
		if fx.starts("a") != 1 || fx.ends("a") != 0 {
			t.Fatalf("A started %d, ended %d", fx.starts("a"), fx.ends("a"))
		}
		e.checkFramesOnce()
	})
}

// The lane restarts (Shutdown: bye draining, its work written off as
// outcome_unknown, R2 (1)) and a new replica on the same store takes the
// executor back: it lists nothing, so the fence kills the old work, and new
// work runs on a higher generation.
func TestLaneRestart(t *testing.T) {
	e := newEnv(t)
	e.startExecutor()
	e.online()
	gen1 := e.srv.Presence(e.deviceID).Gen
	fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
	a := e.dispatch(execInstr(fx.cmd("a", pf.longRunning(g))))
	pids := pf.waitPids(t)
	old := e.srv
	e.restartLane()
	oa := collect(t, e.ctx, a)
	if oa.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("A settled %v, want outcome_unknown from the draining replica", oa)
	}
	eventually(t, "the executor was told bye draining", func() bool {
		return e.px.count(func(f frame) bool { return f.Dir == toDevice && f.T == "bye" && f.Reason == "draining" }) == 1
	})
	if p := old.Presence(e.deviceID); p.Online {
		t.Fatal("the old replica still holds the device")
	}
	e.online()
	gen2 := e.srv.Presence(e.deviceID).Gen
	if gen2 <= gen1 {
		t.Fatalf("generation %v after %v", gen2, gen1)
	}
	if ack := e.helloAckOf(); len(ack.Pending) != 0 {
		t.Fatalf("the new replica lists %v", ack.Pending)
	}
	if live := anyAlive(pids); len(live) > 0 {
		t.Fatalf("after the new replica's fence, %v are alive", live)
	}
	// The old replica refuses work; the new one runs it.
	if c, err := old.Dispatch(e.ctx, e.deviceID, execInstr(fx.cmd("x", ""))); err != nil {
		t.Fatal(err)
	} else if o := collect(t, e.ctx, c); o.settled.State != protocol.StateTerminalNeverStarted {
		t.Fatalf("the drained replica: %v", o)
	}
	g.open(t)
	if o := e.run(execInstr(fx.cmd("b", "echo out"))); !o.ok() || o.stdout() != "out\n" {
		t.Fatalf("on the new replica: %v", o)
	}
	if fx.starts("a") != 1 || fx.ends("a") != 0 || fx.starts("x") != 0 || fx.starts("b") != 1 {
		t.Fatalf("A %d/%d, x %d, b %d", fx.starts("a"), fx.ends("a"), fx.starts("x"), fx.starts("b"))
	}
	e.checkFramesOnce()

	// And the same again, while a drop is in progress: the executor is
	// offline when the replica drains.
	fx2, g2, pf2 := e.sidefx("fx2"), e.gate("c"), e.pidFile("c")
	c := e.dispatch(execInstr(fx2.cmd("c", pf2.longRunning(g2))))
	pids = pf2.waitPids(t)
	e.px.block()
	e.px.cutAll()
	e.restartLane()
	if o := collect(t, e.ctx, c); o.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("C settled %v", o)
	}
	e.px.unblock()
	e.online()
	if live := anyAlive(pids); len(live) > 0 {
		t.Fatalf("after the fence, %v are alive", live)
	}
	g2.open(t)
	e.checkFramesOnce()
}

// Revocation (R13): bye revoked, the work in flight written off as
// outcome_unknown and killed, Run ends with ErrRevoked, and the key
// material is deleted (by `sema device serve`, the executor's owner: see
// revoke_cli_test.go); a new connection is refused.
func TestRevocationStopsTheRuntime(t *testing.T) {
	e := newEnv(t)
	r := e.startExecutor()
	e.online()
	fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
	a := e.dispatch(execInstr(fx.cmd("a", pf.longRunning(g))))
	pids := pf.waitPids(t)
	e.revoke()
	if o := collect(t, e.ctx, a); o.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("A settled %v", o)
	}
	if err := e.runEnd(r); !errors.Is(err, executor.ErrRevoked) {
		t.Fatalf("Run: %v, want ErrRevoked", err)
	}
	if live := anyAlive(pids); len(live) > 0 {
		t.Fatalf("Run returned with %v alive", live)
	}
	if n := e.px.count(func(f frame) bool { return f.Dir == toDevice && f.T == "bye" && f.Reason == "revoked" }); n != 1 {
		t.Fatalf("%d bye revoked", n) // Run has returned: the executor read it
	}
	// A new process with the old key is refused revoked (§1.4) and stops.
	r2 := e.startExecutor()
	if err := e.runEnd(r2); !errors.Is(err, executor.ErrRevoked) {
		t.Fatalf("a second Run: %v, want ErrRevoked", err)
	}
	if o := e.run(execInstr(fx.cmd("b", ""))); o.settled.State != protocol.StateTerminalNeverStarted {
		t.Fatalf("after revocation: %v", o)
	}
	g.open(t)
	if fx.starts("a") != 1 || fx.ends("a") != 0 || fx.starts("b") != 0 {
		t.Fatalf("A %d/%d, b %d", fx.starts("a"), fx.ends("a"), fx.starts("b"))
	}
	e.checkFramesOnce()
}

// A fence that cannot finish in time: the unlisted command ignores SIGTERM
// and dies only at SIGKILL, after a kill grace longer than FenceWait. The
// executor drops each socket without generationAck and fences again on the
// next (§1.5: "generationAck is never sent while unaccounted work is
// alive"); the lane dispatches nothing on those sockets (R10), and the
// instruction queued meanwhile runs once, after the fence.
func TestFenceThatOutlastsFenceWait(t *testing.T) {
	e := newEnv(t)
	e.startExecutor(func(c *executor.Config) {
		c.FenceWait = 100 * time.Millisecond
		c.Ops.KillGrace = time.Second
	})
	e.online()
	fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
	a := e.dispatch(execInstr(fx.cmd("a", "trap '' TERM; "+pf.longRunning(g))))
	pids := pf.waitPids(t)

	// Every generationAck is checked as it reaches the proxy.
	var mu sync.Mutex
	var violations []string
	e.px.setFault(func(f *frame) action {
		if f.Dir == toLane && f.T == "generationAck" {
			if live := anyAlive(pids); len(live) > 0 {
				mu.Lock()
				violations = append(violations, fmt.Sprintf("generationAck %s with %v alive", f.Gen, live))
				mu.Unlock()
			}
		}
		return forward
	})
	e.restartLane() // the new replica lists nothing: A is to be fenced
	if o := collect(t, e.ctx, a); o.code() != protocol.ErrOutcomeUnknown {
		t.Fatalf("A settled %v", o)
	}
	eventually(t, "the executor is talking to the new replica", func() bool {
		return e.px.count(func(f frame) bool { return f.T == "helloAck" }) > 1
	})
	// Dispatched while the executor fences: queued on a socket awaiting
	// generationAck, or refused never-started between two sockets, which
	// a caller may retry.
	var ob outcome
	for {
		ob = collect(t, e.ctx, e.dispatch(execInstr(fx.cmd("b", "echo out"))))
		if !neverStarted(ob) {
			break
		}
		if fx.starts("b") != 0 {
			t.Fatalf("B never started, yet it ran")
		}
	}
	if !ob.ok() || ob.stdout() != "out\n" || fx.starts("b") != 1 {
		t.Fatalf("B: %v", ob)
	}
	mu.Lock()
	if len(violations) > 0 {
		t.Fatalf("the fence was not waited for: %v", violations)
	}
	mu.Unlock()
	if live := anyAlive(pids); len(live) > 0 {
		t.Fatalf("%v alive", live)
	}
	// No instruction went out on a socket before its generationAck.
	acked := map[int]bool{}
	unacked := 0
	for _, f := range e.px.frames() {
		switch {
		case f.Dir == toLane && f.T == "generationAck":
			acked[f.Conn] = true
		case f.Dir == toDevice && f.T == "instruction" && !acked[f.Conn]:
			t.Fatalf("an instruction on socket %d before its generationAck", f.Conn)
		}
	}
	for _, f := range e.px.frames() {
		if f.T == "helloAck" && !acked[f.Conn] {
			unacked++
		}
	}
	t.Logf("%d sockets dropped by the executor without generationAck while the fence waited", unacked)
	g.open(t)
	if fx.starts("a") != 1 || fx.ends("a") != 0 {
		t.Fatalf("A %d/%d", fx.starts("a"), fx.ends("a"))
	}
	e.checkFramesOnce()
}
