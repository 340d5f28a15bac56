package e2e

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		if f.Dir == toLane && f.T == "chunk" && f.Kind == "stdout" && forwarded.Add(1) == 16 {
			close(arrived) // 1 MiB of 64 KiB chunks
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
