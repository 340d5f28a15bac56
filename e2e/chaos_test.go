package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
)

// Everything at once: concurrent instructions under random drops, while the
// socket is cut on demand, the executor restarts (gracefully, and while
// offline, each time a new epoch), the lane restarts on the same store, and
// callers cancel. The callers retry only what provably never started; what
// the tasks left on disk must agree with what their callers were told.
func TestChaos(t *testing.T) {
	e := newEnv(t, func(c *lane.Config) { c.MaxInflight = 8; c.ExecutionGrace = time.Second })
	cur := e.startExecutor()
	e.online()
	fx := e.sidefx("fx")
	wdir := filepath.Join(e.ws, "w")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n, conc = 300, 8
	tasks := make([]*task, n)
	for i := range tasks {
		tasks[i] = &task{i: i}
		if i%10 == 3 {
			tasks[i].write = true
			tasks[i].path = filepath.Join(wdir, fmt.Sprintf("f%d", i))
			tasks[i].data = content(6000 + i)
		}
	}
	s := seed(t)
	p := 0.005
	if v := os.Getenv("SEMA_E2E_P"); v != "" {
		p, _ = strconv.ParseFloat(v, 64)
	}
	e.px.setFault(randomFault(s, p))

	var mu sync.Mutex
	inflight := map[string]*lane.Call{}
	onCall := func(c *lane.Call) {
		mu.Lock()
		defer mu.Unlock()
		inflight[c.ID] = c
	}

	stop := make(chan struct{})
	chaosDone := make(chan map[string]int)
	go func() {
		events := map[string]int{}
		defer func() { chaosDone <- events }()
		r := rand.New(rand.NewPCG(s, 0xc4a05))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(60+r.IntN(120)) * time.Millisecond):
			}
			switch x := r.IntN(100); {
			case x < 35:
				events["cut"]++
				e.px.cutAll()
			case x < 65:
				events["cancel"]++
				mu.Lock()
				for id, c := range inflight {
					delete(inflight, id)
					select {
					case <-c.Done():
						continue
					default:
					}
					c.Cancel()
					break
				}
				mu.Unlock()
			case x < 77:
				events["executor restart, graceful"]++
				cur.cancel()
				if err := waitRun(cur); err != nil {
					t.Errorf("Run: %v", err)
					return
				}
				cur = e.startExecutor()
			case x < 89:
				events["executor restart, offline"]++
				e.px.block()
				e.px.cutAll()
				cur.cancel()
				err := waitRun(cur)
				cur = e.startExecutor()
				e.px.unblock()
				if err != nil {
					t.Errorf("Run: %v", err)
					return
				}
			default:
				events["lane restart"]++
				if err := e.drainLane(); err != nil {
					t.Error(err)
					return
				}
				old := e.hs
				srv, hs := e.startLane()
				e.mu.Lock()
				e.srv, e.hs = srv, hs
				e.mu.Unlock()
				e.px.setTarget(hs.Listener.Addr().String())
				old.Close()
			}
		}
	}()

	work := make(chan *task)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tk := range work {
				tk.instructionBody = "sleep 0.02"
				e.runTask(tk, fx, onCall)
			}
		}()
	}
	for _, tk := range tasks {
		work <- tk
	}
	close(work)
	wg.Wait()
	close(stop)
	events := <-chaosDone
	e.px.setFault(nil)
	if t.Failed() {
		return
	}
	t.Logf("%d tasks, %d connections, %d cuts, events %v", n, e.px.connections(), e.px.cutCount(), events)
	verifyTasks(t, fx, tasks)
	e.checkFramesOnce()
	e.online()
	if p := e.srv.Presence(e.deviceID); p.Inflight != 0 {
		t.Errorf("the lane still holds %d instructions", p.Inflight)
	}
	e.px.cutAll()
	e.online()
	eventually(t, "the executor holds nothing", func() bool { return cur.rt.Pending() == 0 })
}

// waitRun waits for a runner's Run without failing the test from another
// goroutine.
func waitRun(r *runner) error {
	select {
	case r.err = <-r.done:
		r.ended = true
		return r.err
	case <-time.After(waitLimit):
		return fmt.Errorf("Run did not return")
	}
}
