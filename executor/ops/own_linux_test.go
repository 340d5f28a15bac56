package ops

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// The state dir bind-mounted under an allowed root is the state dir:
// removing the tree that holds the mount is refused with nothing removed,
// and the key and the record stay.
func TestRemoveNeverTakesTheStateDirThroughABindMount(t *testing.T) {
	fx := newOwnFixture(t)
	mustWrite(t, fx.state+"/device.json", "{}", 0o600)
	tree := fx.root + "/ws/tree"
	for _, d := range []string{tree + "/mnt", tree + "/other"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, tree+"/other/f", "x", 0o644)
	if err := syscall.Mount(fx.state, tree+"/mnt", "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("no bind mount here (it needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(tree+"/mnt", syscall.MNT_DETACH) })
	for _, prepared := range []bool{false, true} {
		env := *fx.env
		if prepared {
			env.Prepare()
		}
		for _, p := range []string{tree, tree + "/mnt"} {
			out, _ := runFile(t, &env, protocol.KindRemove, dirArgs(p, boolp(true)))
			f := wantFail(t, out, protocol.ErrPermissionDenied)
			if !strings.Contains(f.Message, "own files") || !strings.Contains(f.Message, "nothing was removed") && p == tree {
				t.Fatalf("remove -r %s: %q", p, f.Message)
			}
		}
		for _, p := range []string{fx.key, fx.state + "/device.json", tree + "/other/f"} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("remove through the bind mount took %s: %v", p, err)
			}
		}
		// Reading through the mount is refused too.
		out, _ := runFile(t, &env, protocol.KindReadTextFile, protocol.PathArgs{Path: tree + "/mnt/device.key"})
		wantFail(t, out, protocol.ErrPermissionDenied)
	}
}

// The identities are current: a state file replaced under a new inode is
// known by the new one at once, and its old inode, once freed and handed
// to another file, is no longer the executor's.
func TestOwnIdentitiesFollowAReplacedStateFile(t *testing.T) {
	dir := tempRealDir(t)
	key := dir + "/device.key"
	mustWrite(t, key, "old", 0o600)
	ids := newOwnIDs([]string{dir, key})
	old := fileIDOf(t, key)
	if ids.owner(old) != key {
		t.Fatalf("the key's identity is not known")
	}
	time.Sleep(2 * ownYoung) // a directory stamped in the same tick is read again anyway
	// Replaced atomically, as the executor writes its files.
	mustWrite(t, dir+"/device.key.tmp", "new", 0o600)
	keep := dir + "/../old-key-" + strconv.Itoa(os.Getpid()) // the old inode lives on under another name
	if err := os.Link(key, keep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(keep) })
	if err := os.Rename(dir+"/device.key.tmp", key); err != nil {
		t.Fatal(err)
	}
	if got := ids.owner(fileIDOf(t, key)); got != key {
		t.Errorf("the replaced key's new identity: owner %q, want %q", got, key)
	}
	if got := ids.owner(old); got != "" {
		t.Errorf("the replaced key's old identity is still the executor's (%q): a new file given that inode would be refused", got)
	}
}

func fileIDOf(t *testing.T, p string) fileID {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return statID(&st)
}

// /proc/<pid> of a process the executor started, however deep, is never
// served: a command's environment and memory are not the lane's to read.
func TestTheProcEntriesOfTheExecutorsDescendantsAreNeverServed(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & echo $!; wait")
	cmd.Env = append(os.Environ(), "SEMA_TEST_CHILD_SECRET=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	grandchild := strings.TrimSpace(string(buf[:n]))
	env := &Env{WorkspaceRoot: tempRealDir(t), AllowedRoots: []string{"/"}}
	for _, pid := range []string{strconv.Itoa(cmd.Process.Pid), grandchild} {
		for _, p := range []string{"/proc/" + pid + "/environ", "/proc/" + pid + "/cmdline"} {
			res, sink := runFile(t, env, protocol.KindReadTextFile, protocol.PathArgs{Path: p})
			ownRefused(t, "read "+p, res)
			if len(sink.chunks) != 0 {
				t.Fatalf("%s sent content", p)
			}
		}
	}
	// A process the executor did not start is served as before.
	res, _ := runFile(t, env, protocol.KindReadTextFile, protocol.PathArgs{Path: "/proc/1/cmdline"})
	if f, ok := res.(protocol.Failure); ok && strings.Contains(f.Message, "never served") {
		t.Fatalf("pid 1 is refused as the executor's own: %q", f.Message)
	}
}
