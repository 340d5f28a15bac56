package sandbox

import (
	"os"
	"strings"
	"testing"
)

// The executor's main thread, by which the kernel judges a signal or a
// /proc read aimed at its pid, never enters a command's domain, however
// many commands start and from whichever thread.
func TestTheMainThreadIsNeverConfined(t *testing.T) {
	w := newWorld(t)
	s := w.policy(t, WorkspaceWrite, false)
	for range 100 {
		if out, code := run(t, s, w.ws, "true"); code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "NoNewPrivs:\t0") {
		t.Fatalf("the main thread took a command's restrictions:\n%s", b)
	}
	out, code := run(t, s, w.ws, "cat /proc/$PPID/environ; kill -0 $PPID && echo signalled")
	if code != 1 || strings.Contains(out, "PATH=") || strings.Contains(out, "signalled") {
		t.Fatalf("a command reached into the executor: exit %d %q", code, out)
	}
}
