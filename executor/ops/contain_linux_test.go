package ops

import (
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// This process's /proc entries are never served: its memory, environment
// and descriptors (the key is read into memory) — with or without roots.
func TestThisProcessInProcIsNeverServed(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	tid := strconv.Itoa(syscall.Gettid())
	pid := strconv.Itoa(os.Getpid())
	for _, env := range []*Env{nil, {}, {AllowedRoots: []string{"/"}}} {
		for _, p := range []string{"/proc/self/environ", "/proc/" + pid + "/status", "/proc/thread-self/status",
			"/proc/self/fd/0", "/proc/" + tid + "/status", "/proc/self/task/" + tid + "/status"} {
			for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindCanonicalPath, protocol.KindFileInfo} {
				out, sink := runFile(t, env, kind, protocol.PathArgs{Path: p})
				ownRefused(t, string(kind)+" "+p, out)
				if len(sink.chunks) != 0 {
					t.Fatalf("%s %s sent content", kind, p)
				}
			}
		}
		out, _ := runFile(t, env, protocol.KindListDir, protocol.PathArgs{Path: "/proc/self/fd"})
		ownRefused(t, "listDir /proc/self/fd", out)
	}
	// Another process's /proc is only as contained as any other path.
	out, _ := runFile(t, &Env{AllowedRoots: []string{"/"}}, protocol.KindExists, protocol.PathArgs{Path: "/proc/1"})
	wantArm[protocol.StatOutcome](t, out)
}
