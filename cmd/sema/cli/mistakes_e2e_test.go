package cli_test

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// A path or command typed with a byte that is not UTF-8 cannot cross the
// lane's JSON: sent anyway it would arrive with U+FFFD in its place and
// name another file. It is refused as a bad argument before anything is
// sent, and the file whose name has the U+FFFD is untouched.
func TestAnArgumentThatIsNotUTF8IsRefusedNotReplaced(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	_, id, _ := enrollAndServe(t, s, ws)
	lookalike := filepath.Join(ws, "bad\uFFFD.txt")
	if err := os.WriteFile(lookalike, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "x")
	os.WriteFile(local, []byte("x"), 0o644)
	for _, args := range [][]string{
		{"fs", "rm", "bad\xff.txt"},
		{"fs", "cat", "bad\xff.txt"},
		{"fs", "put", local, "bad\xff.txt"},
		{"run", "rm", "bad\xff.txt"},
		{"run", "--cwd", "\xff", "true"},
		{"devices", "rename", id, "box\xff"},
		{"identity", "create", "bob\xff"},
	} {
		_, errOut, code := s.sema(t, nil, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, `\xff`) || !strings.Contains(errOut, "not valid UTF-8") {
			t.Errorf("%q: exit %d, want %d naming the byte; said %q", args, code, cli.ExitUsage, errOut)
		}
	}
	if b, err := os.ReadFile(lookalike); err != nil || string(b) != "keep me" {
		t.Errorf("the file named with U+FFFD: %q, %v", b, err)
	}
}

// fs get into a directory that does not exist here names LOCAL and its
// directory, not the temp file get would have written beside it.
func TestFsGetIntoAMissingDirectoryNamesIt(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hi"), 0o644)
	missing := filepath.Join(t.TempDir(), "no", "such")
	local := filepath.Join(missing, "x")
	_, errOut, code := s.sema(t, nil, "fs", "get", "notes.txt", local)
	if code != cli.ExitNeverStarted || !strings.Contains(errOut, "cannot write "+local+": "+missing+": no such file or directory") || strings.Contains(errOut, "sema-get") {
		t.Errorf("exit %d, want %d naming %s; said %q", code, cli.ExitNeverStarted, local, errOut)
	}
}

// fs put onto a directory is the device's is_directory, exit 1, nothing
// written; the message says how to put the file into it.
func TestFsPutOntoADirectorySaysHowToPutIntoIt(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	os.Mkdir(filepath.Join(ws, "docs"), 0o755)
	local := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(local, []byte("hi"), 0o644)
	for _, dst := range []string{"docs", "docs/"} {
		_, errOut, code := s.sema(t, nil, "fs", "put", local, dst)
		if code != cli.ExitFailure || !strings.Contains(errOut, "is_directory") || !strings.Contains(errOut, "sema fs put "+local+" docs/notes.txt") {
			t.Errorf("put onto %q: exit %d, want %d with the line that puts it inside; said %q", dst, code, cli.ExitFailure, errOut)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(ws, "docs")); len(entries) != 0 {
		t.Errorf("the directory holds %v", entries)
	}
}

// revoke and forget take an id, as their help says; given a device's name
// they name the id it stands for rather than say there is no such device,
// and revoke nothing.
func TestRevokeByNameNamesTheID(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	if _, errOut, code := s.sema(t, nil, "devices", "rename", id, "laptop"); code != 0 {
		t.Fatalf("rename: exit %d: %s", code, errOut)
	}
	for _, verb := range []string{"revoke", "forget"} {
		_, errOut, code := s.sema(t, nil, "devices", verb, "laptop")
		if code != cli.ExitUsage || !strings.Contains(errOut, `"laptop" is the name of `+id) || !strings.Contains(errOut, "sema devices "+verb+" "+id) {
			t.Errorf("%s laptop: exit %d, want %d naming %s; said %q", verb, code, cli.ExitUsage, id, errOut)
		}
	}
	if !s.online(t, id) {
		t.Error("the device is no longer online")
	}
	if _, errOut, code := s.sema(t, nil, "devices", "revoke", "nosuch"); code != cli.ExitFailure || !strings.Contains(errOut, "device.not_found") {
		t.Errorf("revoke nosuch: exit %d: %s", code, errOut)
	}
}

// Ctrl-C while run or put still reads a stdin that has not ended (a pipe
// whose writer holds on) ends them at once: 130, nothing sent.
func TestCtrlCWhileStdinIsReadEndsAtOnce(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	for _, args := range [][]string{{"run", "wc", "-c"}, {"fs", "put", "-", "in.txt"}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString("part of it\n")
		p := startProc(t, s.env(t), r, args...)
		r.Close()
		waitFor(t, "stdin to be spooled", func() bool { return spooling(p.cmd.Process.Pid) })
		p.cmd.Process.Signal(syscall.SIGINT)
		if code := p.wait(t); code != cli.ExitCancelled {
			t.Errorf("%q: exit %d, want %d: %s", args, code, cli.ExitCancelled, p.stderr)
		}
		w.Close()
	}
	if _, err := os.Stat(filepath.Join(ws, "in.txt")); !os.IsNotExist(err) {
		t.Errorf("put wrote in.txt: %v", err)
	}
}

// spooling reports whether process pid holds its stdin spool file open
// (Linux's /proc): it is then reading stdin.
func spooling(pid int) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.Contains(target, "sema-stdin-") {
			return true
		}
	}
	return false
}

// A device whose executor is not running: the refusal says what brings it
// online, and a local directory given to put without -r says -r.
func TestOfflineDeviceAndADirectoryWithoutRSayWhatToDo(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, id, serve := enrollAndServe(t, s, t.TempDir())
	_, errOut, code := s.sema(t, nil, "fs", "put", t.TempDir(), "d")
	if code != cli.ExitNeverStarted || !strings.Contains(errOut, "is a directory: -r copies it") {
		t.Errorf("put of a directory: exit %d: %s", code, errOut)
	}
	serve.cmd.Process.Signal(syscall.SIGTERM)
	serve.wait(t)
	waitFor(t, "the device to go offline", func() bool { return !s.online(t, id) })
	for _, args := range [][]string{{"run", "true"}, {"fs", "ls"}} {
		_, errOut, code := s.sema(t, nil, args...)
		if code != cli.ExitNeverStarted || !strings.Contains(errOut, "is not connected") || !strings.Contains(errOut, "start `sema device serve` on it") {
			t.Errorf("%q on an offline device: exit %d: %s", args, code, errOut)
		}
	}
}

// A server on every address with no --public-url prints a login line with
// the host's name, which another machine can use, never [::] or 0.0.0.0.
func TestFirstStartOnEveryAddressPrintsTheHostName(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no host name:", err)
	}
	s := startServer(t, t.TempDir(), "--listen", "0.0.0.0:0")
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sema login --server http://" + host + ":" + u.Port() + " <"; !strings.Contains(s.stdout.String(), want) {
		t.Errorf("the first start printed no %q:\n%s", want, s.stdout)
	}
}

// A path that starts with ~ (quoted, so no local shell expanded it) names
// a directory "~" under the workspace root: not found, and the message
// says that ~ is not expanded on the device.
func TestATildePathSaysItIsNotExpanded(t *testing.T) {
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"fs", "ls", "~"}, cli.ExitFailure},
		{[]string{"fs", "cat", "~/notes.txt"}, cli.ExitFailure},
		{[]string{"run", "--cwd", "~/src", "true"}, cli.ExitNeverStarted},
	} {
		_, errOut, code := s.sema(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(errOut, "not_found") || !strings.Contains(errOut, "~ is not expanded on the device") {
			t.Errorf("%q: exit %d, want %d; said %q", tc.args, code, tc.code, errOut)
		}
	}
	if _, errOut, _ := s.sema(t, nil, "fs", "cat", "nope.txt"); strings.Contains(errOut, "~") {
		t.Errorf("a path without ~ got the note: %s", errOut)
	}
}

// The line enroll ends with runs as printed: plain `sema device serve` for
// the default state dir, and a --state-dir with a space quoted.
func TestEnrollEndsWithTheServeLineThatWorks(t *testing.T) {
	s := startServer(t, t.TempDir())
	for _, tc := range []struct {
		stateDir, want string
	}{
		{"", "Start serving with: sema device serve\n"},
		{filepath.Join(t.TempDir(), "my state"), "Start serving with: sema device serve --state-dir '"},
	} {
		line, errOut, code := s.sema(t, nil, "token", "--workspace", t.TempDir())
		if code != 0 {
			t.Fatalf("token: exit %d: %s", code, errOut)
		}
		args := strings.Fields(line)[1:]
		if tc.stateDir != "" {
			args = append(args, "--state-dir", tc.stateDir)
		}
		p := startProc(t, append(s.env(t), "XDG_CONFIG_HOME="+t.TempDir(), "SEMA_DEVICE_DIR="), nil, args...)
		if code := p.wait(t); code != 0 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("enroll --state-dir %q: exit %d, want %q in %q", tc.stateDir, code, tc.want, p.stderr)
		}
	}
}

// Ctrl-C while enroll waits for the lane's answer is 130, like every other
// interrupted command, and keeps the key that may have reached the lane so
// that the same line finishes the same enrollment.
func TestCtrlCDuringEnrollIsCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan struct{})
	go func() { // a lane that takes the request and never answers
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 4096))
		close(got)
		io.Copy(io.Discard, c)
	}()
	state := filepath.Join(t.TempDir(), "state")
	p := startProc(t, nil, nil, "device", "enroll", "--server", "http://"+ln.Addr().String(),
		"--token", "set_x", "--workspace", t.TempDir(), "--state-dir", state)
	<-got
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != cli.ExitCancelled || !strings.Contains(p.stderr.String(), "run the same enroll again") {
		t.Errorf("exit %d, want %d: %s", code, cli.ExitCancelled, p.stderr)
	}
	if keys, _ := filepath.Glob(filepath.Join(state, "*.key*")); len(keys) == 0 {
		t.Errorf("the key that may have reached the lane is gone from %s", state)
	}
}
