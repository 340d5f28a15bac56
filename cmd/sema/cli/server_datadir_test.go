package cli_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// H.6: a second `sema server` on a data dir exits 1 at once, naming the
// server that holds it, whatever the registry; it never listens.
func TestASecondServerOnOneDataDirExits1NamingTheFirst(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	want := fmt.Sprintf("another sema server (pid %d) is using %s", first.cmd.Process.Pid, data)
	for _, flags := range [][]string{
		nil,
		// The data dir holds admin.key with PostgreSQL too: refused before
		// the database is dialled (nothing listens on port 1).
		{"--postgres", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"},
	} {
		second := startProc(t, nil, nil, append([]string{"server", "--listen", "127.0.0.1:0", "--data", data}, flags...)...)
		if code := second.wait(t); code != 1 {
			t.Fatalf("second server %v: exit %d, want 1\n%s", flags, code, second.stderr)
		}
		if got := second.stderr.String(); !strings.Contains(got, want) || listeningURL.MatchString(got) {
			t.Fatalf("second server %v said:\n%s\nwant %q and no listening", flags, got, want)
		}
	}
	first.devices(t) // the first still answers
}

// The kernel releases the lock when its holder dies, however it dies: a
// server started after a SIGKILL runs.
func TestTheDataDirLockDiesWithItsServer(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	again := startServer(t, data)
	again.cmd.Process.Signal(syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Fatalf("restart after SIGKILL: exit %d\n%s", code, again.stderr)
	}
}
