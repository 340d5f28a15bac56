package sandbox

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The thread that starts a command is inside the command's own Landlock
// domain, so nothing in Landlock keeps the command from it: the executor
// must be out of dumpable reach (its /proc/<pid>/task/<tid>/ entries:
// environment, memory, descriptors) and the guard filter must refuse a
// signal to that thread's id. Root passes the first check whatever the
// executor does, so the executor of this test runs as an ordinary user:
// this test binary again, as nobody when the test runs as root.
const threadsHelperEnv = "SEMA_SANDBOX_TEST_THREADS_HELPER"

func TestACommandCannotReachTheThreadThatStartedIt(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cmd := exec.Command(bin, "-test.run=^TestThreadsHelper$", "-test.v")
	cmd.Env = append(os.Environ(), threadsHelperEnv+"=1", "TMPDIR="+root)
	if os.Geteuid() == 0 {
		bin = filepath.Join(root, "sandbox.test")
		if err := copyExecutable(os.Args[0], bin); err != nil {
			t.Fatal(err)
		}
		const nobody = 65534
		for _, d := range []string{filepath.Dir(root), root} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(root, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.Dir = root
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	out, err := cmd.CombinedOutput()
	text := string(out)
	if strings.Contains(text, "no sandbox on this kernel") {
		t.Skip(text)
	}
	if err != nil || !strings.Contains(text, "--- PASS: TestThreadsHelper") {
		t.Fatalf("the executor as an ordinary user: %v\n%s", err, text)
	}
}

// TestThreadsHelper is the executor of the test above; it runs only there.
func TestThreadsHelper(t *testing.T) {
	if os.Getenv(threadsHelperEnv) == "" {
		t.Skip("run by TestACommandCannotReachTheThreadThatStartedIt")
	}
	if os.Geteuid() == 0 {
		t.Fatal("the helper must not run as root")
	}
	w := newWorld(t)
	for _, mode := range []Mode{WorkspaceWrite, Off} {
		s := w.policy(t, mode, false)
		out, code := run(t, s, w.ws, `for t in /proc/$PPID/task/*; do tid=${t##*/}
			cat $t/environ >/dev/null 2>&1 && echo "environ of $tid read"
			ls $t/fd >/dev/null 2>&1 && echo "descriptors of $tid listed"
			dd if=$t/mem bs=1 count=1 skip=4194304 >/dev/null 2>&1 && echo "memory of $tid read"
			kill -0 $tid 2>/dev/null && echo "thread $tid signalled"
		done; true`)
		if code != 0 || strings.Contains(out, " read") || strings.Contains(out, "listed") || strings.Contains(out, "signalled") {
			t.Errorf("%s: exit %d: %s", mode, code, out)
		}
	}
}

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
