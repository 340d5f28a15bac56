package ops

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// An output pipe is raised to outputPipeBytes, so that one read can take
// a whole chunk, where the system lets this user (fs.pipe-max-size).
func TestOutputPipeIsRaised(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		t.Skip(err)
	}
	if max, _ := strconv.Atoi(strings.TrimSpace(string(b))); max < outputPipeBytes && os.Geteuid() != 0 {
		t.Skipf("fs.pipe-max-size %d is below %d", max, outputPipeBytes)
	}
	r, w, err := outputPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	n, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil || n != outputPipeBytes {
		t.Fatalf("pipe capacity %d, %v; want %d", n, err, outputPipeBytes)
	}
}
