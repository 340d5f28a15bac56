package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
)

// A half-open drop: the executor sees its socket end, but the lane's side
// stays open and silent. The executor's reconnects are refused
// already_connected until the lane judges the old socket stale (R14: three
// heartbeat intervals without a frame) and closes or supersedes it; then the
// same-epoch reconnect resumes the instruction (R2), which runs once and
// reports everything.
func TestHalfOpenDrop(t *testing.T) {
	cases := []struct {
		name  string
		fault fault // nil: half-open on demand while the command waits
	}{
		{"while the command runs", nil},
		{"instead of the result", once(is(toLane, "result"), halfOpen)},
		{"instead of the exit chunk", once(func(f *frame) bool { return f.Dir == toLane && f.T == "chunk" && f.Kind == "exit" }, halfOpen)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A short heartbeat: the lane lets go of the silent socket
			// after three of them.
			e := newEnv(t, func(c *lane.Config) { c.HeartbeatInterval = 150 * time.Millisecond })
			e.startExecutor()
			e.online()
			fx, g := e.sidefx("fx"), e.gate("a")
			body := "for i in 1 2 3; do echo a$i; done; " + g.wait() + "; for i in 1 2 3; do echo b$i; done"
			e.px.setFault(tc.fault)
			var a *lane.Call
			if tc.fault == nil {
				a = e.dispatch(execInstr(fx.cmd("a", body)))
				eventually(t, "the first output reached the lane", func() bool {
					return e.px.count(func(f frame) bool { return f.Dir == toLane && f.T == "chunk" && f.Action == forward }) > 0
				})
				e.px.halfOpenAll()
			} else {
				g.open(t)
				a = e.dispatch(execInstr(fx.cmd("a", body)))
				eventually(t, "the fault fired", func() bool { return e.px.cutCount() > 0 })
			}
			e.online()
			if ack := e.helloAckOf(); !slices.Equal(ack.Pending, []string{a.ID}) {
				t.Fatalf("pendingInstructions %v, want [%s]", ack.Pending, a.ID)
			}
			g.open(t)
			o := collect(t, e.ctx, a)
			if !o.ok() || o.stdout() != "a1\na2\na3\nb1\nb2\nb3\n" {
				t.Fatalf("%v, stdout %q", o, o.stdout())
			}
			if fx.starts("a") != 1 || fx.ends("a") != 1 || e.framesFor(a.ID) != 1 {
				t.Fatalf("ran %d/%d, %d frames", fx.starts("a"), fx.ends("a"), e.framesFor(a.ID))
			}
			refused := e.px.count(func(f frame) bool { return f.T == "helloReject" && f.Code == "already_connected" })
			t.Logf("%d hellos refused already_connected before the lane let go of the half-open socket", refused)
			e.checkFramesOnce()
		})
	}
}
