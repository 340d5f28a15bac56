package cli_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func randomFile(t *testing.T, dir, name string, n int, mode os.FileMode) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// fs put and get of files of any size, through the streamed upload and
// readBinaryFile, byte-exact; get is atomic.
func TestFsPutAndGetAnySize(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	local := t.TempDir()

	for _, size := range []int{20 << 20, 97 << 20} { // the second is over the old 96 MiB cap
		src, content := randomFile(t, local, "big.bin", size, 0o644)
		out, errOut, code := s.sema(t, nil, "fs", "put", "--timeout", "2m", src, "big.bin")
		if code != 0 || !strings.HasSuffix(out, " "+filepath.Join(ws, "big.bin")+" ("+strconv.Itoa(size)+" bytes)\n") {
			t.Fatalf("put %d: exit %d: %q %s", size, code, out, errOut)
		}
		if errOut != "" {
			t.Errorf("put wrote on a stderr that is no terminal: %q", errOut)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "big.bin")); err != nil || sha(b) != sha(content) {
			t.Fatalf("put %d: the device's file differs (%v)", size, err)
		}
		got := filepath.Join(local, "got.bin")
		if _, errOut, code := s.sema(t, nil, "fs", "get", "--timeout", "2m", "big.bin", got); code != 0 || errOut != "" {
			t.Fatalf("get: exit %d: %s", code, errOut)
		}
		if b, err := os.ReadFile(got); err != nil || sha(b) != sha(content) {
			t.Fatalf("get %d: the local file differs (%v)", size, err)
		}
	}
	// get to stdout.
	_, content := randomFile(t, ws, "small.bin", 300<<10, 0o644)
	out, errOut, code := s.sema(t, nil, "fs", "get", "small.bin", "-")
	if code != 0 || sha([]byte(out)) != sha(content) {
		t.Fatalf("get to stdout: exit %d, %d bytes: %s", code, len(out), errOut)
	}
	// Without LOCAL, get writes the remote's name in the current directory.
	here := t.TempDir()
	cmd := exec.Command(semaBin, "fs", "get", filepath.Join(ws, "small.bin"))
	cmd.Dir, cmd.Env = here, append(os.Environ(), s.env(t)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("get without LOCAL: %v %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(here, "small.bin")); !bytes.Equal(b, content) {
		t.Fatal("get without LOCAL: differs")
	}
	// get into a directory takes the remote's name; an existing file is replaced.
	if _, errOut, code := s.sema(t, nil, "fs", "get", "small.bin", local); code != 0 {
		t.Fatalf("get into a dir: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "small.bin")); !bytes.Equal(b, content) {
		t.Fatal("get into a dir: differs")
	}
	// A failing get leaves the local file as it was and no temp file.
	keep := filepath.Join(local, "keep.txt")
	os.WriteFile(keep, []byte("mine"), 0o600)
	if _, errOut, code := s.sema(t, nil, "fs", "get", "missing.bin", keep); code != cli.ExitFailure || !strings.Contains(errOut, "not_found") {
		t.Fatalf("get of a missing file: exit %d: %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "fs", "get", ".", filepath.Join(local, "dir.bin")); code != cli.ExitFailure || !strings.Contains(errOut, "is a directory") {
		t.Fatalf("get of a directory: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(keep); string(b) != "mine" {
		t.Errorf("a failed get changed the local file: %q", b)
	}
	entries, _ := os.ReadDir(local)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".sema-get-") || e.Name() == "dir.bin" {
			t.Errorf("a failed get left %s", e.Name())
		}
	}
}

// A new file gets the local file's executable bits (as scp does); a
// replaced file keeps its mode on the device.
func TestFsPutExecutableBits(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	local := filepath.Join(t.TempDir(), "s.sh")
	os.WriteFile(local, []byte("#!/bin/sh\necho ran\n"), 0o755)
	if out, errOut, code := s.sema(t, nil, "fs", "put", local, "s.sh"); code != 0 || !strings.HasPrefix(out, "created ") {
		t.Fatalf("put: exit %d: %q %s", code, out, errOut)
	}
	if out, errOut, code := s.sema(t, nil, "run", "--", "./s.sh"); code != 0 || out != "ran\n" {
		t.Fatalf("run ./s.sh: exit %d: %q %s", code, out, errOut)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "s.sh")); fi.Mode().Perm()&0o111 != 0o111 {
		t.Errorf("mode %v, want the x bits of 0755", fi.Mode())
	}
	// A file of mode 0700 adds u+x only.
	only := filepath.Join(t.TempDir(), "u.sh")
	os.WriteFile(only, []byte("x"), 0o700)
	s.sema(t, nil, "fs", "put", only, "u.sh")
	if fi, _ := os.Stat(filepath.Join(ws, "u.sh")); fi.Mode().Perm()&0o111 != 0o100 {
		t.Errorf("u.sh mode %v, want u+x only", fi.Mode())
	}
	// Replacing keeps the device's mode, whatever the local one.
	os.Chmod(filepath.Join(ws, "s.sh"), 0o600)
	if out, errOut, code := s.sema(t, nil, "fs", "put", local, "s.sh"); code != 0 || !strings.HasPrefix(out, "wrote ") {
		t.Fatalf("put over it: exit %d: %q %s", code, out, errOut)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "s.sh")); fi.Mode().Perm() != 0o600 {
		t.Errorf("a replaced file's mode became %v, want 0600", fi.Mode())
	}
	// A path that needs quoting.
	odd := "it's a $(file).sh"
	if _, errOut, code := s.sema(t, nil, "fs", "put", local, odd); code != 0 {
		t.Fatalf("put %q: exit %d: %s", odd, code, errOut)
	}
	if fi, err := os.Stat(filepath.Join(ws, odd)); err != nil || fi.Mode().Perm()&0o111 != 0o111 {
		t.Errorf("%q: %v %v", odd, fi, err)
	}
}

// sema run uploads a stdin that is not a terminal and removes it after.
func TestRunStdin(t *testing.T) {
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())
	if out, errOut, code := s.sema(t, strings.NewReader("a\nb\n"), "run", "--", "wc", "-l"); code != 0 || strings.TrimSpace(out) != "2" {
		t.Fatalf("wc -l: exit %d: %q %s", code, out, errOut)
	}
	bin := make([]byte, 3<<20+5)
	rand.Read(bin)
	if out, errOut, code := s.sema(t, bytes.NewReader(bin), "run", "--", "sha256sum"); code != 0 || !strings.HasPrefix(out, sha(bin)+" ") {
		t.Fatalf("sha256sum: exit %d: %q %s", code, out, errOut)
	}
	// The command's own exit code and shell semantics stay.
	if _, _, code := s.sema(t, strings.NewReader("x"), "run", "--", "read v; [ \"$v\" = x ] && exit 7 # )"); code != 7 {
		t.Errorf("exit through the stdin wrapper: %d, want 7", code)
	}
	// -n reads nothing; an empty stdin uploads nothing.
	before := dispatches(t, s)
	if out, errOut, code := s.sema(t, strings.NewReader("hello"), "run", "-n", "--", "cat"); code != 0 || out != "" {
		t.Fatalf("run -n cat: exit %d: %q %s", code, out, errOut)
	}
	if out, _, code := s.sema(t, strings.NewReader(""), "run", "--", "cat"); code != 0 || out != "" {
		t.Fatalf("run cat of an empty stdin: exit %d: %q", code, out)
	}
	if after := dispatches(t, s); after != before+2 {
		t.Errorf("-n and an empty stdin cost %v dispatches, want 2", after-before)
	}
	// Ctrl-C: cancelled as ever, and the stdin file is removed too.
	run := startProc(t, s.env(t), strings.NewReader("x\n"), "run", "--", "echo started; exec sleep 60")
	waitFor(t, "the command to start", func() bool { return strings.Contains(run.stdout.String(), "started") })
	run.cmd.Process.Signal(syscall.SIGINT)
	if code := run.wait(t); code != cli.ExitCancelled || strings.Contains(run.stderr.String(), "warning") {
		t.Fatalf("Ctrl-C: exit %d: %s", code, run.stderr)
	}
	// Every stdin file is gone from the device's temp dir, the sandboxed
	// command's TMPDIR.
	out, errOut, code := s.sema(t, nil, "run", "--", `ls -A "$TMPDIR"`)
	if code != 0 || strings.Contains(out, "sema-stdin-") {
		t.Errorf("the device's temp dir: exit %d: %q %s", code, out, errOut)
	}
}

// A file that shrinks on the device while get reads it is never passed off
// as whole: fewer bytes than the file had when the get began is a failure
// that says so (no silent truncation).
func TestFsGetOfAFileThatShrinksFails(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	size := 128 << 20
	remote := filepath.Join(ws, "grows-and-shrinks.bin")
	if err := os.WriteFile(remote, bytes.Repeat([]byte("0123456789abcdef"), size/16), 0o644); err != nil {
		t.Fatal(err)
	}
	// Standard output is a pipe read only once the file was cut: the
	// lane's flow control holds the read a few MiB in, far from its end.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var errOut bytes.Buffer
	cmd := exec.Command(semaBin, "fs", "get", "grows-and-shrinks.bin", "-")
	cmd.Env, cmd.Stdout, cmd.Stderr = append(os.Environ(), s.env(t)...), pw, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	first := make([]byte, 1)
	if _, err := pr.Read(first); err != nil {
		t.Fatalf("no output: %v", err)
	}
	if err := os.Truncate(remote, 0); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.Copy(io.Discard, pr)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitFailure || !strings.Contains(errOut.String(), "changed on the device while it was read") {
		t.Fatalf("get of a file cut to 0 bytes after %d of %d were read: %v: %s", rest+1, size, err, errOut.String())
	}
	// A file left alone is got whole, with nothing said.
	os.WriteFile(remote, bytes.Repeat([]byte("x"), 1<<20), 0o644)
	local := filepath.Join(t.TempDir(), "whole.bin")
	if _, errOut, code := s.sema(t, nil, "fs", "get", "grows-and-shrinks.bin", local); code != 0 || errOut != "" {
		t.Fatalf("get of an unchanged file: exit %d: %s", code, errOut)
	}
	if fi, err := os.Stat(local); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("get of an unchanged file: %v %v", fi, err)
	}
	// Through a symlink whose own size (its target's name) is more than the
	// file it leads to: the link's size says nothing of the file's.
	os.WriteFile(filepath.Join(ws, "t"), []byte("hi\n"), 0o644)
	os.Symlink(filepath.Join(ws, "t"), filepath.Join(ws, "a-link-longer-than-its-file"))
	if out, errOut, code := s.sema(t, nil, "fs", "get", "a-link-longer-than-its-file", "-"); code != 0 || out != "hi\n" || errOut != "" {
		t.Fatalf("get through a symlink: exit %d %q: %s", code, out, errOut)
	}
}
