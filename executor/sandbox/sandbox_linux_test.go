package sandbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// world is a machine in a temp dir: a home with credential stores, a
// workspace, a state dir inside the home's config, a temp dir.
type world struct {
	home, ws, state, tmp, outside string
}

func newWorld(t *testing.T) world {
	t.Helper()
	root := t.TempDir()
	w := world{
		home:    filepath.Join(root, "home"),
		ws:      filepath.Join(root, "home", "proj"),
		state:   filepath.Join(root, "home", ".config", "sema", "device"),
		tmp:     filepath.Join(root, "tmp"),
		outside: filepath.Join(root, "outside"),
	}
	for _, d := range []string{w.ws, w.state, w.tmp, w.outside, filepath.Join(w.home, ".ssh")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(w.state, "device.key"), "KEY")
	write(t, filepath.Join(w.home, ".ssh", "id_ed25519"), "SSHKEY")
	write(t, filepath.Join(w.home, "notes.txt"), "NOTES")
	return w
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (w world) policy(t *testing.T, mode Mode, netOff bool) *Sandbox {
	t.Helper()
	p, err := NewPolicy(Options{
		Mode: mode, NetworkOff: netOff,
		Workspace: w.ws, TempDir: w.tmp, Own: []string{w.state},
		Home: w.home, ConfigDir: filepath.Join(w.home, ".config"),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(p)
	if err != nil {
		t.Skipf("no sandbox on this kernel: %v", err)
	}
	return s
}

// run runs script under s and returns its combined output and exit code.
func run(t *testing.T, s *Sandbox, dir, script string) (string, int) {
	t.Helper()
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, tree, err := s.Launch("/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{
		Dir: dir, Env: os.Environ(), Files: []*os.File{nil, wr, wr},
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	wr.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	var out bytes.Buffer
	out.ReadFrom(r)
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), st.ExitCode()
}

func TestWorkspaceWriteConfinesFiles(t *testing.T) {
	w := newWorld(t)
	s := w.policy(t, WorkspaceWrite, false)
	cases := []struct {
		name, script string
		ok           bool
	}{
		{"workspace writable", "echo hi > " + w.ws + "/f && cat " + w.ws + "/f", true},
		{"temp writable", "echo hi > " + w.tmp + "/f", true},
		{"outside refused", "echo hi > " + w.outside + "/f", false},
		{"home itself refused", "echo hi > " + w.home + "/new", false},
		{"state dir unreadable", "cat " + w.state + "/device.key", false},
		{"state dir unwritable", "echo x > " + w.state + "/x", false},
		{"ssh unreadable", "cat " + w.home + "/.ssh/id_ed25519", false},
		{"home readable", "cat " + w.home + "/notes.txt", true},
		{"etc readable", "cat /etc/passwd >/dev/null", true},
		{"dev null writable", "echo x > /dev/null", true},
		{"home listable", "ls " + w.home + " >/dev/null", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, s, w.ws, c.script)
			if (code == 0) != c.ok {
				t.Fatalf("exit %d, want ok=%v; output %q", code, c.ok, out)
			}
			if !c.ok && !strings.Contains(out, "ermission denied") {
				t.Fatalf("refused without the kernel's EACCES: %q", out)
			}
		})
	}
}

func TestTreeEndsSetsidDescendants(t *testing.T) {
	w := newWorld(t)
	s := w.policy(t, Off, false)
	if !s.track {
		t.Skip("no Landlock ABI 6 here")
	}
	pidFile := filepath.Join(w.tmp, "pid")
	r, wr, _ := os.Pipe()
	p, tree, err := s.Launch("/bin/sh", []string{"sh", "-c", "(setsid sleep 300 & echo $! > " + pidFile + ") ; true"}, &os.ProcAttr{
		Dir: w.ws, Env: os.Environ(), Files: []*os.File{nil, wr, wr}, Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	wr.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	r.Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if tree.Empty() {
		t.Fatal("the setsid sleeper is not seen")
	}
	tree.Signal(syscall.SIGKILL)
	for i := 0; i < 1000 && !tree.Empty(); i++ {
		syscall.Nanosleep(&syscall.Timespec{Nsec: 1e6}, nil)
	}
	if !tree.Empty() {
		t.Fatal("the setsid sleeper outlived SIGKILL to its tree")
	}
	b, _ := os.ReadFile(pidFile)
	out, _ := exec.Command("ps", "-o", "pid=,stat=", "-p", strings.TrimSpace(string(b))).Output()
	if len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("sleeper still listed: %s", out)
	}
}

// Where the kernel cannot enforce a mode, serve refuses to start with a
// message that names what is missing and the flag that opts out; it never
// falls back to running commands unconfined.
func TestNewRefusesWhatTheKernelCannotEnforce(t *testing.T) {
	confining := Policy{Mode: WorkspaceWrite}
	cases := []struct {
		name    string
		p       Policy
		k       kernel
		refused bool
		says    []string
	}{
		{"no Landlock", confining, kernel{abiErr: syscall.ENOSYS}, true, []string{"no Landlock", "--sandbox off", "ABI 6"}},
		{"Landlock disabled", Policy{Mode: ReadOnly}, kernel{abiErr: syscall.EOPNOTSUPP}, true, []string{"not enabled", "lsm=", "--sandbox off"}},
		{"an old ABI", confining, kernel{abi: 5}, true, []string{"offers ABI 5", "ABI 6", "--sandbox off"}},
		{"seccomp refused", Policy{Mode: WorkspaceWrite, NetworkOff: true}, kernel{abi: 7, seccompErr: syscall.EINVAL}, true,
			[]string{"seccomp", "without --sandbox-network off"}},
		{"off on an old kernel starts, and says what it cannot follow", Policy{Mode: Off}, kernel{abi: 4}, false,
			[]string{"can outlive", "offers ABI 4"}},
		{"seccomp refused: the guard of a confining mode", confining, kernel{abi: 7, seccompErr: syscall.EINVAL}, true,
			[]string{"seccomp", "refused", "--sandbox off"}},
		{"seccomp refused: off starts, and says what it cannot follow", Policy{Mode: Off}, kernel{abi: 7, seccompErr: syscall.EINVAL}, false,
			[]string{"can outlive", "seccomp"}},
		{"the default on ABI 7", confining, kernel{abi: 7}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := newSandbox(c.p, c.k)
			if (err != nil) != c.refused {
				t.Fatalf("err %v, want refused=%v", err, c.refused)
			}
			text := ""
			if err != nil {
				text = err.Error()
			} else {
				text = strings.Join(s.Notes(), "\n")
			}
			for _, w := range c.says {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
		})
	}
}

// The state dir stays hidden when it lies inside the workspace: the
// workspace is granted around it.
func TestTheStateDirInsideTheWorkspaceStaysHidden(t *testing.T) {
	w := newWorld(t)
	w.state = filepath.Join(w.ws, ".sema", "device")
	if err := os.MkdirAll(w.state, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(w.state, "device.key"), "KEY")
	if err := os.MkdirAll(filepath.Join(w.ws, "src"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(w.ws, "README"), "read me")
	s := w.policy(t, WorkspaceWrite, false)
	for script, ok := range map[string]bool{
		"cat " + w.state + "/device.key":                        false,
		"echo x > " + w.state + "/x":                            false,
		"rm -rf " + filepath.Join(w.ws, ".sema"):                false,
		"echo x > " + w.ws + "/src/f && cat " + w.ws + "/src/f": true,
		"echo more >> " + w.ws + "/README":                      true,
	} {
		out, code := run(t, s, w.ws, script)
		if (code == 0) != ok {
			t.Errorf("%s: exit %d, want ok=%v: %q", script, code, ok, out)
		}
	}
	if _, err := os.Stat(filepath.Join(w.state, "device.key")); err != nil {
		t.Fatalf("the key is gone: %v", err)
	}
}

// --sandbox-network off: a command opens unix-domain and netlink sockets
// only; every other family (the internet, raw frames, a virtual machine's
// host) is refused with the kernel's EACCES, and the executor itself keeps
// the network.
func TestNetworkOffLeavesOnlyUnixAndNetlinkSockets(t *testing.T) {
	w := newWorld(t)
	s := w.policy(t, WorkspaceWrite, true)
	sock := filepath.Join(w.tmp, "s")
	// The shell cannot open a socket itself (dash has no /dev/tcp): python3
	// does, where there is one (the real binaries' test connects to the
	// lane with sema itself).
	script := `if command -v python3 >/dev/null; then python3 -c '
import socket, sys
AF_VSOCK = 40
for fam, typ in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),
                 (socket.AF_PACKET, socket.SOCK_RAW), (AF_VSOCK, socket.SOCK_STREAM)):
    try:
        socket.socket(fam, typ); print("open", fam)
    except PermissionError as e:
        print("refused", fam, e.errno)
    except OSError as e:
        print("failed", fam, e.errno)
socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print("netlink ok")
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.bind(sys.argv[1]); print("unix ok")
' ` + sock + `; else echo "no python3"; fi`
	out, code := run(t, s, w.ws, script)
	if strings.Contains(out, "no python3") {
		t.Skip("no python3 to open sockets with")
	}
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6, unix.AF_PACKET, unix.AF_VSOCK} {
		if !strings.Contains(out, fmt.Sprintf("refused %d 13\n", fam)) {
			t.Errorf("family %d not refused with EACCES", fam)
		}
	}
	if code != 0 || !strings.Contains(out, "netlink ok") || !strings.Contains(out, "unix ok") {
		t.Errorf("exit %d", code)
	}
	if t.Failed() {
		t.Logf("the command said:\n%s", out)
	}
	if _, err := net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatalf("the executor lost the network: %v", err)
	}
}
