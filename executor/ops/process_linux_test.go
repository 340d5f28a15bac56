package ops

import (
	"os"
	"syscall"
	"testing"
)

// waitExited returns only once the process has exited, and leaves it
// unreaped (its zombie pins the pgid), in the netpoller and in the blocking
// fallback alike.
func TestWaitExitedReturnsOnceTheProcessExitedAndLeavesItUnreaped(t *testing.T) {
	for name, wait := range map[string]func(int) error{"pidfd": waitExited, "blocking": waitExitedBlocking} {
		t.Run(name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "read x; exit 3"}, &os.ProcAttr{
				Files: []*os.File{r, nil, nil},
				Sys:   &syscall.SysProcAttr{Setpgid: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				err    error
				exited bool
			}
			done := make(chan answer, 1)
			go func() {
				err := wait(p.Pid)
				done <- answer{err, exitedNow(p.Pid)}
			}()
			w.Close() // read x sees EOF: the shell exits
			a := <-done
			if a.err != nil || !a.exited {
				t.Fatalf("wait returned %v with the process exited %v; want nil, exited", a.err, a.exited)
			}
			if err := syscall.Kill(-p.Pid, 0); err != nil {
				t.Fatalf("the group is gone before the reap (kill: %v): the process was reaped", err)
			}
			if st, err := p.Wait(); err != nil || st.ExitCode() != 3 {
				t.Fatalf("reap: %v, %v", st, err)
			}
		})
	}
}
