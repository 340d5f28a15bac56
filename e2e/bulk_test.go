package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// randomFault cuts the socket at a random frame with probability p (before,
// after or in the middle of it), and swallows the odd chunkAck or
// heartbeat, whose loss the protocol absorbs by design (a later chunkAck is
// cumulative; a missing heartbeat is one of three).
func randomFault(seed uint64, p float64) fault {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 0x5e3a))
	cuts := []action{cutBefore, cutAfter, cutMid}
	return func(f *frame) action {
		if f.T == "" {
			return forward // WebSocket control frames
		}
		mu.Lock()
		defer mu.Unlock()
		x := r.Float64()
		switch {
		case x < p:
			return cuts[r.IntN(len(cuts))]
		case x < 2*p && (f.T == "chunkAck" || f.T == "heartbeat"):
			return drop
		}
		return forward
	}
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("SEMA_E2E_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		s = n
	}
	t.Logf("seed %d (set SEMA_E2E_SEED to replay)", s)
	return s
}

// task is one unit of work as a caller sees it: retried only when the lane
// or the executor says it never started, which is what makes a retry safe.
type task struct {
	i     int
	write bool
	path  string
	data  []byte
	// instructionBody runs before the exec's `echo out-i`.
	instructionBody string
	attempts        int
	out             outcome
	ids             []string
}

func (tk *task) instruction(fx sidefx) lane.Instruction {
	if tk.write {
		return writeInstr(tk.path, tk.data)
	}
	tag := strconv.Itoa(tk.i)
	body := fmt.Sprintf("echo out-%d", tk.i)
	if tk.instructionBody != "" {
		body = tk.instructionBody + "; " + body
	}
	return execInstr(fx.cmd(tag, body))
}

// neverStarted reports an outcome that proves the work never started: safe
// to retry (§5.1, §3.3).
func neverStarted(o outcome) bool {
	return o.settled.State == protocol.StateTerminalNeverStarted || o.code() == protocol.ErrTargetUnavailable
}

// runTask runs tk until it settles with anything but a never-started.
// onCall, when set, is told each call as it is dispatched.
func (e *env) runTask(tk *task, fx sidefx, onCall func(*lane.Call)) {
	for tk.attempts = 1; ; tk.attempts++ {
		if tk.attempts > 200 {
			e.t.Errorf("task %d never started in %d attempts: %v", tk.i, tk.attempts, tk.out)
			return
		}
		// A caller would not dispatch to a device it sees offline, or
		// leaving (it said goodbye and takes no new work, R15).
		deadline := time.Now().Add(waitLimit)
		for p := e.server().Presence(e.deviceID); (!p.Online || p.Leaving) && time.Now().Before(deadline); p = e.server().Presence(e.deviceID) {
			time.Sleep(2 * time.Millisecond)
		}
		in := tk.instruction(fx)
		in.Timeout = 5 * time.Second // with ExecutionGrace, the bound of a result given up (R5, R12)
		call, err := e.server().Dispatch(e.ctx, e.deviceID, in)
		if err != nil {
			e.t.Errorf("task %d: %v", tk.i, err)
			return
		}
		if onCall != nil {
			onCall(call)
		}
		tk.ids = append(tk.ids, call.ID)
		tk.out = collect(e.t, e.ctx, call)
		if !neverStarted(tk.out) {
			return
		}
	}
}

// bulk runs n tasks, conc at a time, with random drops, and checks every
// invariant on what they left behind.
func bulk(t *testing.T, n, conc int, p float64) {
	if v := os.Getenv("SEMA_E2E_P"); v != "" {
		p, _ = strconv.ParseFloat(v, 64)
	}
	e := newEnv(t, func(c *lane.Config) { c.MaxInflight = 8; c.ExecutionGrace = time.Second })
	r := e.startExecutor()
	e.online()
	fx := e.sidefx("fx")
	wdir := filepath.Join(e.ws, "w")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	tasks := make([]*task, n)
	for i := range tasks {
		tasks[i] = &task{i: i}
		if i%10 == 3 {
			tasks[i].write = true
			tasks[i].path = filepath.Join(wdir, fmt.Sprintf("f%d", i))
			tasks[i].data = content(6000 + i) // two or three payload parts
		}
	}
	e.px.setFault(randomFault(seed(t), p))

	work := make(chan *task)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tk := range work {
				e.runTask(tk, fx, nil)
			}
		}()
	}
	for _, tk := range tasks {
		work <- tk
	}
	close(work)
	wg.Wait()
	e.px.setFault(nil)
	if t.Failed() {
		return
	}

	verifyTasks(t, fx, tasks)
	e.checkFramesOnce()
	ok := 0
	for _, tk := range tasks {
		if tk.out.ok() {
			ok++
		}
	}
	t.Logf("%d tasks, %d connections, %d cuts", n, e.px.connections(), e.px.cutCount())
	if e.px.cutCount() == 0 {
		t.Error("no drop was injected")
	}
	if ok < n*8/10 {
		t.Errorf("only %d of %d tasks succeeded", ok, n)
	}
	// Everything was accounted for on both sides: the lane holds nothing in
	// flight and, once a socket has settled the last acks, neither does the
	// executor.
	e.online()
	if p := e.srv.Presence(e.deviceID); p.Inflight != 0 {
		t.Errorf("the lane still holds %d instructions", p.Inflight)
	}
	e.px.cutAll() // a fence releases whatever result lost its ack in a cut
	e.online()
	eventually(t, "the executor holds nothing", func() bool { return r.rt.Pending() == 0 })
}

func TestSequentialInstructionsWithRandomDrops(t *testing.T) {
	bulk(t, 1000, 1, 0.01)
}

func TestConcurrentInstructionsWithRandomDrops(t *testing.T) {
	bulk(t, 100, 100, 0.01)
}

// verifyTasks checks what the tasks left behind against what their callers
// were told. Every exec appends "start i" and "end i" to the side-effect
// log around `echo out-i`; every write targets its own file.
//
//   - no task ran more than once, over all its attempts;
//   - a success ran exactly once and reported its whole output;
//   - a write landed whole exactly when it succeeded (outcome_unknown may
//     go either way) and left no staging file;
//   - a cancel receipt not_started means nothing ran;
//   - the only other ends are the honest ones: outcome_unknown, aborted (the
//     executor stopped it), transport_lost (a write's payload was cut).
func verifyTasks(t *testing.T, fx sidefx, tasks []*task) {
	t.Helper()
	counts := map[string]int{}
	for _, tk := range tasks {
		o := tk.out
		word := string(o.code())
		if c, isCancel := o.settled.Outcome.(protocol.CancelledOutcome); isCancel {
			word = "cancelled " + string(c.State)
		} else if o.ok() {
			word = "ok"
		}
		counts[word]++
		if tk.write {
			landed := checkWrite(t, tk.path, tk.data, nil)
			switch {
			case o.ok() && word == "ok" && !landed:
				t.Errorf("write %d: %v but the file did not land whole", tk.i, o)
			case word == "cancelled not_started" && landed:
				t.Errorf("write %d: %v but the file landed", tk.i, o)
			case !o.ok() && o.code() != protocol.ErrOutcomeUnknown && landed:
				t.Errorf("write %d: %v but the file landed", tk.i, o)
			case !o.ok() && !slices.Contains([]protocol.ErrorCode{protocol.ErrOutcomeUnknown, protocol.ErrTransportLost, protocol.ErrAborted}, o.code()):
				t.Errorf("write %d: unexpected %v", tk.i, o)
			}
			continue
		}
		tag := strconv.Itoa(tk.i)
		starts, ends := fx.starts(tag), fx.ends(tag)
		if starts > 1 || ends > 1 {
			t.Errorf("task %d ran %d times (ended %d) over %d attempts %v", tk.i, starts, ends, tk.attempts, tk.ids)
		}
		switch word {
		case "ok":
			if starts != 1 || ends != 1 || o.stdout() != fmt.Sprintf("out-%d\n", tk.i) {
				t.Errorf("task %d: %v, stdout %q, ran %d/%d", tk.i, o, o.stdout(), starts, ends)
			}
		case "cancelled not_started":
			if starts != 0 {
				t.Errorf("task %d: cancelled not_started, but it ran", tk.i)
			}
		case "cancelled killed", string(protocol.ErrOutcomeUnknown), string(protocol.ErrAborted):
		default:
			t.Errorf("task %d: unexpected %v", tk.i, o)
		}
	}
	t.Logf("outcomes %v", counts)
}
