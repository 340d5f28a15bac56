package e2e

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// A caller that stops reading slows the command down instead of losing its
// output: the lane withholds chunkAck beyond half its delivery bound, the
// executor holds back what is unacknowledged, the pipe fills and the
// command blocks. 16 MiB is eight times the delivery bound; unpaced, the
// lane would cancel the command once 2 MiB waited unread (§4).
func TestASlowReaderSlowsTheCommandAndLosesNothing(t *testing.T) {
	const size = 16 << 20
	e := newEnv(t)
	e.startExecutor()
	e.online()
	var forwarded atomic.Int64
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	var cancelOnce sync.Once
	e.px.setFault(func(f *frame) action {
		if f.Dir == toLane && f.T == "chunk" && f.Kind == "stdout" && forwarded.Add(1) == (1<<20)/ops.MaxChunkBytes {
			close(arrived) // 1 MiB of chunks
		}
		if f.Dir == toDevice && f.T == "cancel" {
			cancelOnce.Do(func() { close(cancelled) })
		}
		return forward
	})
	call := e.dispatch(execInstr("head -c 16777216 /dev/zero"))
	select {
	case <-arrived:
	case <-e.ctx.Done():
		t.Fatal("the first MiB never arrived")
	}
	// Nobody reads for a while: an unpaced device overflows the delivery
	// bound in this time and is cancelled; a paced one waits.
	select {
	case <-cancelled:
		t.Fatalf("the lane cancelled the command of a slow reader (Err() = %v)", call.Err())
	case <-time.After(300 * time.Millisecond):
	}
	o := collect(t, e.ctx, call)
	if !o.ok() || call.Err() != nil {
		t.Fatalf("outcome %v, Err() = %v", o, call.Err())
	}
	if got := o.stdout(); len(got) != size || strings.Trim(got, "\x00") != "" {
		t.Fatalf("%d bytes of stdout, want %d zero bytes", len(got), size)
	}
	if ex, ok := o.settled.Outcome.(protocol.ExecOutcome); !ok || ex.ExitCode != 0 {
		t.Fatalf("outcome %v", o)
	}
}

// When the lane does cancel for the delivery bound — an executor allowed to
// run a whole bound past its acknowledgements (MaxUnackedBytes = 2 MiB, so
// half the bound unread plus its allowance no longer fits) and a reader who
// stops — the HTTP caller's outcome is the lane's aborted failure naming the
// bound, marked cancelledBy "lane", and /metrics counts it: never a cancel
// receipt that reads like the caller's own.
func TestTheLanesOwnCancelSaysSoToTheHTTPCaller(t *testing.T) {
	e := newEnv(t)
	e.startExecutor(func(c *executor.Config) { c.MaxUnackedBytes = 2 << 20 })
	e.online()
	cancelled := make(chan struct{})
	var cancelOnce sync.Once
	e.px.setFault(func(f *frame) action {
		if f.Dir == toDevice && f.T == "cancel" {
			cancelOnce.Do(func() { close(cancelled) })
		}
		return forward
	})
	resp, sc := e.postExec(e.ctx, "head -c 67108864 /dev/zero")
	defer resp.Body.Close()
	// Nobody reads: the socket buffers fill, the lane's backlog passes the
	// bound, and the lane cancels.
	select {
	case <-cancelled:
	case <-e.ctx.Done():
		t.Fatal("the lane never cancelled a device that ran a whole bound ahead of its acknowledgements")
	}
	var last httpEvent
	for sc.Scan() {
		var ev httpEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	var o struct {
		OK        bool   `json:"ok"`
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	}
	json.Unmarshal(last.Outcome, &o)
	if last.Event != "outcome" || last.CancelledBy != "lane" || o.OK || o.ErrorCode != "aborted" ||
		!strings.Contains(o.Message, "the lane cancelled the command") || !strings.Contains(o.Message, "pending-delivery bound") {
		t.Fatalf("last event %+v, outcome %+v", last, o)
	}
	if n := e.server().Metrics().DeliveryOverflows; n != 1 {
		t.Fatalf("DeliveryOverflows = %d, want 1", n)
	}
}
