package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// The socket dropped at each step of the handshake (§1.2–§1.5): the
// executor reconnects, and the first instruction after it runs exactly once.
// An instruction dispatched while the lane waited for generationAck is
// queued, never sent on the dropped socket, and runs once after the
// reconnect.
func TestHandshakeDrops(t *testing.T) {
	cases := []struct {
		name  string
		fault fault
	}{
		{"before hello", once(is(toLane, "hello"), cutBefore)},
		{"before hello, three sockets in a row", func() fault {
			n := 0
			var mu sync.Mutex
			return func(f *frame) action {
				mu.Lock()
				defer mu.Unlock()
				if f.Dir == toLane && f.T == "hello" && n < 3 {
					n++
					return cutBefore
				}
				return forward
			}
		}()},
		{"in the middle of hello", once(is(toLane, "hello"), cutMid)},
		{"the challenge lost with the socket", once(is(toDevice, "challenge"), cutBefore)},
		{"after hello, before helloAck", once(is(toDevice, "helloAck"), cutBefore)},
		{"in the middle of helloAck", once(is(toDevice, "helloAck"), cutMid)},
		{"after helloAck, before generationAck", once(is(toLane, "generationAck"), cutBefore)},
		{"in the middle of generationAck", once(is(toLane, "generationAck"), cutMid)},
		{"right after generationAck", once(is(toLane, "generationAck"), cutAfter)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.px.setFault(tc.fault)
			e.startExecutor()
			eventually(t, "the fault fired", func() bool { return e.px.cutCount() > 0 })
			e.online()
			e.px.setFault(nil)
			fx := e.sidefx("fx")
			o := e.run(execInstr(fx.cmd("a", "echo out")))
			if !o.ok() || o.stdout() != "out\n" {
				t.Fatalf("after the reconnect: %v, stdout %q", o, o.stdout())
			}
			if fx.starts("a") != 1 || fx.ends("a") != 1 {
				t.Fatalf("ran %d times", fx.starts("a"))
			}
			e.checkFramesOnce()
		})
	}

	t.Run("a dispatch queued while the lane awaits generationAck", func(t *testing.T) {
		e := newEnv(t)
		fx := e.sidefx("fx")
		var queued *lane.Call
		var qerr error
		fired := make(chan struct{})
		e.px.setFault(func() fault {
			inner := once(is(toLane, "generationAck"), cutBefore)
			return func(f *frame) action {
				a := inner(f)
				if a == cutBefore {
					// The lane holds helloAck's generation open, dispatch
					// closed (R10): this instruction can only be queued.
					queued, qerr = e.srv.Dispatch(e.ctx, e.deviceID, execInstr(fx.cmd("q", "echo queued")))
					close(fired)
				}
				return a
			}
		}())
		e.startExecutor()
		<-fired
		if qerr != nil {
			t.Fatal(qerr)
		}
		o := collect(t, e.ctx, queued)
		if !o.ok() || o.stdout() != "queued\n" {
			t.Fatalf("the queued instruction: %v, stdout %q", o, o.stdout())
		}
		if fx.starts("q") != 1 || fx.ends("q") != 1 || e.framesFor(queued.ID) != 1 {
			t.Fatalf("ran %d times, %d instruction frames", fx.starts("q"), e.framesFor(queued.ID))
		}
		// It was sent on the second socket, never on the first.
		for _, f := range e.px.frames() {
			if f.T == "instruction" && f.Conn == 1 {
				t.Fatalf("an instruction went out before generationAck: %v", f)
			}
		}
		e.checkFramesOnce()
	})
}

// The socket dropped around an instruction frame (R1, R2): never re-sent;
// if it reached the executor it runs once and its result is delivered after
// the same-epoch reconnect; if it did not, the executor says so
// (target_unavailable, "never started") and nothing ran.
func TestInstructionFrameDrops(t *testing.T) {
	cases := []struct {
		name    string
		act     action
		reached bool
	}{
		{"lost with the socket", cutBefore, false},
		{"cut in the middle", cutMid, false},
		{"right after it", cutAfter, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startExecutor()
			e.online()
			fx := e.sidefx("fx")
			e.px.setFault(once(is(toDevice, "instruction"), tc.act))
			call := e.dispatch(execInstr(fx.cmd("a", "sleep 0.1; echo out")))
			o := collect(t, e.ctx, call)
			if tc.reached {
				if !o.ok() || o.stdout() != "out\n" || fx.starts("a") != 1 || fx.ends("a") != 1 {
					t.Fatalf("%v, stdout %q, ran %d times", o, o.stdout(), fx.starts("a"))
				}
			} else {
				if o.settled.State != protocol.StateTerminal || o.code() != protocol.ErrTargetUnavailable {
					t.Fatalf("an instruction that never reached the executor settled %v, want terminal target_unavailable", o)
				}
				if fx.starts("a") != 0 {
					t.Fatal("an instruction that never reached the executor ran")
				}
			}
			if n := e.framesFor(call.ID); n != 1 || e.px.cutCount() != 1 {
				t.Fatalf("%d instruction frames, %d cuts", n, e.px.cutCount())
			}
			// The next one runs normally on the new socket.
			e.online()
			if o := e.run(execInstr(fx.cmd("b", ""))); !o.ok() || fx.starts("b") != 1 {
				t.Fatalf("after the reconnect: %v", o)
			}
			e.checkFramesOnce()
		})
	}

	// A frame swallowed without a drop: the lane cannot know and never
	// re-sends; its backstop settles outcome_unknown (R12), and nothing ran.
	t.Run("swallowed, the socket stays up", func(t *testing.T) {
		e := newEnv(t, func(c *lane.Config) { c.ExecutionGrace = 200 * time.Millisecond })
		e.startExecutor()
		e.online()
		fx := e.sidefx("fx")
		e.px.setFault(once(is(toDevice, "instruction"), drop))
		in := execInstr(fx.cmd("a", ""))
		in.Timeout = 300 * time.Millisecond
		call := e.dispatch(in)
		o := collect(t, e.ctx, call)
		if o.code() != protocol.ErrOutcomeUnknown || fx.starts("a") != 0 || e.framesFor(call.ID) != 1 {
			t.Fatalf("%v, ran %d times, %d frames", o, fx.starts("a"), e.framesFor(call.ID))
		}
		e.checkFramesOnce()
	})
}

// The socket dropped at each step of an exec's output (§4, R2, R5–R8): the
// caller gets the whole stream, contiguous from 0 with one exit chunk last,
// and the command ran once — or the call settles outcome_unknown, never a
// truncated success.
func TestStreamDrops(t *testing.T) {
	const lines = 12 // one chunk each: 10 ms apart, over the emitter's 5 ms coalescing
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	body := fmt.Sprintf("i=1; while [ $i -le %d ]; do echo line$i; i=$((i+1)); sleep 0.01; done", lines)
	stdout := func(f *frame) bool { return f.Dir == toLane && f.T == "chunk" && f.Kind == "stdout" }
	exit := func(f *frame) bool { return f.Dir == toLane && f.T == "chunk" && f.Kind == "exit" }
	cases := []struct {
		name  string
		fault fault
		cuts  int  // how many times the fault drops the socket
		lossy bool // the fault loses a frame without a drop: outcome_unknown is the only honest end
	}{
		{"right after the third chunk", nth(3, stdout, cutAfter), 1, false},
		{"the third chunk lost with the socket", nth(3, stdout, cutBefore), 1, false},
		{"in the middle of the third chunk", nth(3, stdout, cutMid), 1, false},
		{"the exit chunk lost with the socket", once(exit, cutBefore), 1, false},
		{"after the exit chunk, before the result", once(is(toLane, "result"), cutBefore), 1, false},
		{"in the middle of the result", once(is(toLane, "result"), cutMid), 1, false},
		{"after the result, before resultAck", once(is(toDevice, "resultAck"), cutBefore), 1, false},
		{"a chunkAck lost with the socket", nth(3, is(toDevice, "chunkAck"), cutBefore), 1, false},
		{"a chunkAck swallowed", nth(3, is(toDevice, "chunkAck"), drop), 0, false},
		{"every chunkAck swallowed", func(f *frame) action {
			if f.Dir == toDevice && f.T == "chunkAck" {
				return drop
			}
			return forward
		}, 0, false},
		{"two drops in one stream", func() fault {
			a, b := nth(2, stdout, cutAfter), nth(6, stdout, cutBefore)
			return func(f *frame) action {
				if x := a(f); x != forward {
					return x
				}
				return b(f)
			}
		}(), 2, false},
		{"the third chunk swallowed, the socket stays up", nth(3, stdout, drop), 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startExecutor()
			e.online()
			fx := e.sidefx("fx")
			e.px.setFault(tc.fault)
			call := e.dispatch(execInstr(fx.cmd("a", body)))
			o := collect(t, e.ctx, call)
			if fx.starts("a") != 1 {
				t.Fatalf("ran %d times", fx.starts("a"))
			}
			if tc.lossy {
				if o.code() != protocol.ErrOutcomeUnknown {
					t.Fatalf("a stream with a hole settled %v, want outcome_unknown", o)
				}
				if !strings.HasPrefix(want.String(), o.stdout()) || o.stdout() == want.String() {
					t.Fatalf("the caller got %q: not a strict prefix of the output", o.stdout())
				}
			} else if !o.ok() || o.stdout() != want.String() {
				t.Fatalf("%v, stdout %q", o, o.stdout())
			}
			// resultAck follows the settlement the caller already has.
			eventually(t, "the fault fired", func() bool { return e.px.cutCount() >= tc.cuts })
			if n := e.px.cutCount(); n != tc.cuts {
				t.Fatalf("the fault dropped the socket %d times, want %d", n, tc.cuts)
			}
			if n := e.framesFor(call.ID); n != 1 {
				t.Fatalf("%d instruction frames", n)
			}
			// The executor lets go of everything once the lane acked it,
			// after however many sockets it took.
			e.px.setFault(nil)
			e.online()
			if o := e.run(execInstr(fx.cmd("b", ""))); !o.ok() {
				t.Fatalf("the next instruction: %v", o)
			}
			e.checkFramesOnce()
		})
	}

	// A read streams data chunks; a drop in the middle resumes it.
	t.Run("a file read cut in the middle", func(t *testing.T) {
		e := newEnv(t)
		e.startExecutor()
		e.online()
		data := content(300 << 10) // five 64 KiB chunks
		path := filepath.Join(e.ws, "big.txt")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		e.px.setFault(nth(2, func(f *frame) bool { return f.Dir == toLane && f.T == "chunk" }, cutMid))
		o := e.run(lane.Instruction{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: path}})
		if !o.ok() || o.stdout() != string(data) {
			t.Fatalf("%v, %d of %d bytes", o, len(o.stdout()), len(data))
		}
		e.checkFramesOnce()
	})
}

// The socket dropped in a write's payload (§3.4): the write lands whole with
// the right digest, or leaves no file (and an existing file untouched), and
// never a staging file.
func TestPayloadDrops(t *testing.T) {
	payload := func(part string) func(*frame) bool {
		return func(f *frame) bool { return f.Dir == toDevice && f.T == "payload" && f.Part == part }
	}
	cases := []struct {
		name   string
		fault  fault
		lands  bool
		exists bool // the target exists before the write
	}{
		{"after the instruction, before begin", once(payload("begin"), cutBefore), false, false},
		{"after begin", once(payload("begin"), cutAfter), false, false},
		{"in the middle of the fifth part", nth(5, payload("chunk"), cutMid), false, false},
		{"between parts", nth(8, payload("chunk"), cutAfter), false, false},
		{"between parts, over an existing file", nth(8, payload("chunk"), cutAfter), false, true},
		{"before commit", once(payload("commit"), cutBefore), false, false},
		{"in the middle of commit", once(payload("commit"), cutMid), false, true},
		{"right after commit", once(payload("commit"), cutAfter), true, false},
		{"right after commit, over an existing file", once(payload("commit"), cutAfter), true, true},
		{"before the result", once(is(toLane, "result"), cutBefore), true, false},
		{"before resultAck", once(is(toDevice, "resultAck"), cutBefore), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startExecutor()
			e.online()
			dir := filepath.Join(e.ws, "out")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "file.bin")
			var old []byte
			if tc.exists {
				old = []byte("the old content\n")
				if err := os.WriteFile(path, old, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data := content(64 << 10)
			e.px.setFault(tc.fault)
			call := e.dispatch(writeInstr(path, data))
			o := collect(t, e.ctx, call)
			landed := checkWrite(t, path, data, old)
			eventually(t, "the fault fired", func() bool { return e.px.cutCount() >= 1 })
			if n := e.px.cutCount(); n != 1 {
				t.Fatalf("the fault dropped the socket %d times", n)
			}
			switch {
			case tc.lands && (!o.ok() || !landed):
				t.Fatalf("%v, landed %v", o, landed)
			case !tc.lands && (o.ok() || landed):
				t.Fatalf("a write whose payload was cut: %v, landed %v", o, landed)
			case o.ok():
				if w, isWrite := o.settled.Outcome.(protocol.WriteOutcome); !isWrite || w.CanonicalPath != path {
					t.Fatalf("the receipt %v", o)
				}
			}
			if n := e.framesFor(call.ID); n != 1 {
				t.Fatalf("%d instruction frames", n)
			}
			// The lane never re-sends payload either: one begin, at most.
			if n := e.px.count(func(f frame) bool { return f.T == "payload" && f.Part == "begin" && f.ID == call.ID }); n > 1 {
				t.Fatalf("%d payload begins", n)
			}
			e.px.setFault(nil)
			e.online()
			if o := e.run(writeInstr(filepath.Join(dir, "next.bin"), data)); !o.ok() {
				t.Fatalf("the next write: %v", o)
			}
			checkWrite(t, path, data, old)
			e.checkFramesOnce()
		})
	}

	t.Run("an append cut in the middle appends nothing", func(t *testing.T) {
		e := newEnv(t)
		e.startExecutor()
		e.online()
		path := filepath.Join(e.ws, "app.log")
		if err := os.WriteFile(path, []byte("head\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.px.setFault(nth(3, payload("chunk"), cutMid))
		o := e.run(lane.Instruction{Kind: protocol.KindAppendFile, Args: protocol.WriteArgs{Path: path}, Content: content(32 << 10)})
		got, _ := os.ReadFile(path)
		if o.ok() || string(got) != "head\n" {
			t.Fatalf("%v; the file has %d bytes", o, len(got))
		}
		e.checkFramesOnce()
	})
}

// A cancel lost with the socket is replayed on the first active tick after
// the same-epoch reconnect (R11); the command is killed, and ran once.
func TestCancelDrops(t *testing.T) {
	cases := []struct {
		name  string
		fault fault
	}{
		{"the cancel lost with the socket", once(is(toDevice, "cancel"), cutBefore)},
		{"the cancel's answer lost with the socket", once(is(toLane, "result"), cutBefore)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startExecutor()
			e.online()
			fx, g, pf := e.sidefx("fx"), e.gate("g"), e.pidFile("a")
			call := e.dispatch(execInstr(fx.cmd("a", pf.longRunning(g))))
			pids := pf.waitPids(t)
			e.px.setFault(tc.fault)
			call.Cancel()
			o := collect(t, e.ctx, call)
			c, isCancel := o.settled.Outcome.(protocol.CancelledOutcome)
			if !isCancel || c.State != protocol.CancelKilled {
				t.Fatalf("cancel settled %v, want cancelled killed", o)
			}
			if live := anyAlive(pids); len(live) > 0 {
				t.Fatalf("killed, but %v are alive", live)
			}
			if fx.starts("a") != 1 || fx.ends("a") != 0 || e.framesFor(call.ID) != 1 || e.px.cutCount() != 1 {
				t.Fatalf("started %d, ended %d, %d frames, %d cuts", fx.starts("a"), fx.ends("a"), e.framesFor(call.ID), e.px.cutCount())
			}
			g.open(t)
			e.checkFramesOnce()
		})
	}
}
