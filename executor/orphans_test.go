package executor

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd
}

// A group recorded by a previous executor process and still the same group
// is killed, whole; its record is forgotten.
func TestReapOrphansKillsARecordedGroup(t *testing.T) {
	r := procRegistry{dir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cmd := startGroup(t)
	pgid := cmd.Process.Pid
	r.add(pgid)
	if _, err := os.Stat(r.path(pgid)); err != nil {
		t.Fatalf("no record: %v", err)
	}
	if killed := r.reapOrphans(); killed != 1 {
		t.Fatalf("killed %d groups, want 1", killed)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the recorded group is still alive")
	}
	// SIGKILL lands asynchronously, and killed members linger as zombies
	// until PID 1 reaps them: poll for a live (non-zombie) member.
	for deadline := time.Now().Add(30 * time.Second); groupAlive(pgid); {
		if time.Now().After(deadline) {
			t.Fatal("a member of the group (the background sleep) survived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if entries, _ := os.ReadDir(r.dir); len(entries) != 0 {
		t.Errorf("records left: %v", entries)
	}
}

// A record that no longer names the same group (another start time, i.e.
// the id was reused) never leads to a kill.
func TestReapOrphansSparesAReusedGroupID(t *testing.T) {
	r := procRegistry{dir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cmd := startGroup(t)
	pgid := cmd.Process.Pid
	rec, ok := record(pgid)
	if !ok {
		t.Skip("no /proc here")
	}
	stale := rec[:len(rec)-1] + "0\n" // another start time (ten times the real one)
	os.WriteFile(filepath.Join(r.dir, strconv.Itoa(pgid)), []byte(stale), 0o600)
	if killed := r.reapOrphans(); killed != 0 {
		t.Fatalf("killed %d groups, want 0", killed)
	}
	if err := syscall.Kill(pgid, 0); err != nil {
		t.Fatalf("an unrelated group was killed: %v", err)
	}
}

// groupAlive reports whether a process of group pgid is alive and not a
// zombie, from /proc.
func groupAlive(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// The identity of a process (boot and start time) is stable while it runs
// and tells two processes apart: on Linux from /proc, on darwin from sysctl
// kern.boottime and KERN_PROC_PID.
func TestRecordIdentifiesAProcess(t *testing.T) {
	self, ok := record(os.Getpid())
	if !ok {
		t.Fatal("no identity for this very process")
	}
	if again, _ := record(os.Getpid()); again != self {
		t.Fatalf("the identity changed from %q to %q", self, again)
	}
	cmd := startGroup(t)
	other, ok := record(cmd.Process.Pid)
	if !ok || other == self || strings.Fields(other)[0] != strings.Fields(self)[0] {
		t.Fatalf("a child %q against this process %q: want the same boot, another start", other, self)
	}
	if _, ok := record(1 << 30); ok {
		t.Fatal("a pid that does not exist has an identity")
	}
}
