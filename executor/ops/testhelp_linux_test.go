package ops

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The Linux halves of the test helpers: the umask from /proc, and dropping
// root's permission bypass for one thread (setfsuid).

// umask reads this process's umask without changing it.
func readUmask(t *testing.T) os.FileMode {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status to read the umask from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return os.FileMode(u)
		}
	}
	t.Skip("/proc/self/status has no Umask line")
	return 0
}

// asNobody runs fn without root's permission bypass. Root passes every
// permission check, so for root it runs fn on a fresh OS thread whose
// filesystem uid and gid are nobodyID's: setfsuid(2) to a non-zero id also
// drops that thread's filesystem capabilities (CAP_DAC_OVERRIDE and the
// like), and File runs every system call of an op on its calling
// goroutine's thread. The thread is never handed back to the scheduler: the
// goroutine ends locked, so the runtime retires it. An unprivileged test
// run needs none of this.
func asNobody(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		fn()
		return
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := unix.Setfsgid(nobodyID); err != nil {
			done <- err
			return
		}
		if err := unix.Setfsuid(nobodyID); err != nil {
			done <- err
			return
		}
		// setfsuid reports no failure; setting again returns the id in force.
		if cur, _ := unix.SetfsuidRetUid(nobodyID); cur != nobodyID {
			done <- fmt.Errorf("the filesystem uid is %d after setting %d", cur, nobodyID)
			return
		}
		defer close(done)
		fn()
	}()
	if err := <-done; err != nil {
		t.Fatalf("setfsuid: %v", err)
	}
}
