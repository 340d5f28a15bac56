package cli_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/protocol"
)

// goodbyeRuns is how many times TestServeSIGTERMSaysGoodbyeEveryTime stops
// an idle executor (enough runs that a goodbye lost in 2 of 4 would show).
const goodbyeRuns = 50

// §1.6 / R15: SIGTERM to an idle `sema device serve` puts goodbye on the
// wire before the normal close, every time, and the log says "goodbye
// sent" only then. The lane asks for a heartbeat every millisecond, so
// heartbeats race the goodbye for the writer.
func TestServeSIGTERMSaysGoodbyeEveryTime(t *testing.T) {
	l := fakelane.New(t, "")
	dir, _ := enrolledDevice(t, l)
	goodbyes := 0
	for run := range goodbyeRuns {
		p := startServe(t, dir)
		c, err := l.Next(ctx(t))
		if err != nil {
			t.Fatalf("run %d: %v; stderr:\n%s", run, err, p.stderr)
		}
		if err := c.Handshake(ctx(t), protocol.Gen(run+1), 1, nil, nil); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t); code != 0 {
			t.Fatalf("run %d: exit %d; stderr:\n%s", run, code, p.stderr)
		}
		if err := c.WaitEnd(ctx(t)); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		n := countGoodbyes(c.Frames())
		if n == 1 && c.EndCode() == websocket.StatusNormalClosure && strings.Contains(p.stderr.String(), "goodbye sent") {
			goodbyes++
			continue
		}
		t.Errorf("run %d: %d goodbyes before the socket ended with %v; stderr:\n%s", run, n, c.EndCode(), p.stderr)
	}
	if goodbyes != goodbyeRuns {
		t.Fatalf("%d goodbyes in %d runs", goodbyes, goodbyeRuns)
	}
}

func countGoodbyes(frames []protocol.DeviceFrame) int {
	n := 0
	for _, f := range frames {
		if g, ok := f.(*protocol.Goodbye); ok && g.Reason == protocol.GoodbyeShutdown {
			n++
		}
	}
	return n
}
