//go:build linux

package cli_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/mcp"
	"golang.org/x/sys/unix"
)

// The sandbox through the real binaries: `sema device serve` started as a
// user would, with SEMA_API_KEY in its environment and a home of its own,
// commands sent by `sema run` and by MCP run_command.

// sandboxedDevice is an enrolled device whose serve runs with a home that
// holds a credential store, and the paths the rules are about.
type sandboxedDevice struct {
	s                                 *laneServer
	id, state, ws, home, allow, outer string
	serve                             *proc
}

const sandboxTestKey = "sk_sandbox_test_secret"

func startSandboxed(t *testing.T, flags ...string) *sandboxedDevice {
	t.Helper()
	return startSandboxedOn(t, nil, flags...)
}

// startSandboxedOn starts serve with tty (when not nil) as its stdin and
// controlling terminal, as from a terminal.
func startSandboxedOn(t *testing.T, tty *os.File, flags ...string) *sandboxedDevice {
	t.Helper()
	d := &sandboxedDevice{s: startServer(t, t.TempDir()), ws: t.TempDir(), home: t.TempDir(), allow: t.TempDir(), outer: t.TempDir()}
	for _, dir := range []string{".ssh", ".cache"} {
		if err := os.Mkdir(filepath.Join(d.home, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.home, ".ssh", "id_ed25519"), []byte("SSH-PRIVATE"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.state, d.id = enroll(t, d.s, d.ws)
	env := []string{"TMPDIR=" + t.TempDir(), "HOME=" + d.home, "XDG_CONFIG_HOME=", "XDG_CACHE_HOME=", "SEMA_API_KEY=" + sandboxTestKey}
	args := append([]string{"device", "serve", "--state-dir", d.state, "--allow-path", d.allow}, flags...)
	if tty == nil {
		d.serve = startProc(t, env, nil, args...)
	} else {
		d.serve = startProcAttr(t, env, tty, &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}, args...)
	}
	waitFor(t, "the device to come online", func() bool {
		select {
		case <-d.serve.done:
			t.Fatalf("serve exited: %v\n%s", d.serve.err, d.serve.stderr)
		default:
		}
		return d.s.online(t, d.id)
	})
	return d
}

// run runs script through `sema run` and returns its stdout, stderr and exit code.
func (d *sandboxedDevice) run(t *testing.T, script string) (string, string, int) {
	t.Helper()
	return d.s.sema(t, nil, "run", "--device", d.id, "--", script)
}

func (d *sandboxedDevice) key(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(d.state, device.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSandboxConfinesCommandsByDefault(t *testing.T) {
	d := startSandboxed(t)
	key := filepath.Join(d.state, device.KeyFile)
	refused := []struct{ name, script string }{
		{"the device key", "cat " + key},
		{"the device key, from a child", "sh -c 'sh -c \"cat " + key + "\"'"},
		{"the state dir", "ls " + d.state + "/ >/dev/null && cat " + filepath.Join(d.state, device.RecordFile)},
		{"a credential store", "cat " + filepath.Join(d.home, ".ssh", "id_ed25519")},
		{"a write outside every root", "echo x > " + filepath.Join(d.outer, "f")},
		{"a write outside every root, from a child", "sh -c 'echo x > " + filepath.Join(d.outer, "g") + "'"},
		{"a write into the state dir", "echo x > " + filepath.Join(d.state, "x")},
		{"the executor's environment", "cat /proc/$PPID/environ"},
		{"a signal to the executor", "kill -0 $PPID"},
	}
	for _, c := range refused {
		out, errOut, code := d.run(t, c.script)
		if code == 0 || strings.Contains(out, d.key(t)) || strings.Contains(out+errOut, sandboxTestKey) || strings.Contains(out, "SSH-PRIVATE") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want it refused", c.name, code, out, errOut)
		}
		if !strings.Contains(errOut, "Permission denied") && !strings.Contains(errOut, "Operation not permitted") {
			t.Errorf("%s: refused without the kernel's own error: %q", c.name, errOut)
		}
	}
	for _, dir := range []string{d.outer} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("a refused write left %v in %s", entries, dir)
		}
	}
	allowed := []struct{ name, script string }{
		{"the workspace", "echo x > " + filepath.Join(d.ws, "f") + " && mkdir -p " + filepath.Join(d.ws, "a/b") + " && mv " + filepath.Join(d.ws, "f") + " " + filepath.Join(d.ws, "a/b/f")},
		{"an --allow-path", "echo x > " + filepath.Join(d.allow, "f")},
		{"the cache dir", "echo x > " + filepath.Join(d.home, ".cache", "f")},
		{"TMPDIR", `echo x > "$TMPDIR/f" && rm "$TMPDIR/f"`},
		{"/etc", "cat /etc/passwd > /dev/null"},
		{"the home's other files", "ls " + d.home + " > /dev/null"},
		{"a pipe and /dev/null", "echo hi | cat > /dev/null"},
	}
	for _, c := range allowed {
		if out, errOut, code := d.run(t, c.script); code != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want it allowed", c.name, code, out, errOut)
		}
	}
	if out, _, code := d.run(t, "env | grep -c '^SEMA_'"); strings.TrimSpace(out) != "0" {
		t.Errorf("SEMA_ variables reach the command: %q (exit %d)", out, code)
	}
	out, _, _ := d.s.sema(t, nil, "device", "status", "--state-dir", d.state)
	if !strings.Contains(out, "sandbox    workspace-write, network on") || !strings.Contains(out, d.state) {
		t.Errorf("device status does not say the sandbox:\n%s", out)
	}
	if !strings.Contains(d.serve.stderr.String(), "msg=sandbox mode=workspace-write") {
		t.Errorf("the start line does not say the sandbox:\n%s", d.serve.stderr)
	}
}

// Nothing a command starts outlives its instruction: a setsid sleeper and
// a double-forked daemon are gone within a second of the instruction's end,
// in the default mode and in off.
func TestSandboxNothingOutlivesItsInstruction(t *testing.T) {
	for _, mode := range []string{"workspace-write", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := startSandboxed(t, "--sandbox", mode)
			scripts := map[string]string{
				"setsid":      `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!`,
				"double fork": `(setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $!' &); sleep 0.2`,
			}
			for name, script := range scripts {
				out, errOut, code := d.run(t, script)
				pid, err := strconv.Atoi(strings.TrimSpace(out))
				if code != 0 || err != nil {
					t.Fatalf("%s: exit %d %q %q", name, code, out, errOut)
				}
				deadline := time.Now().Add(time.Second)
				for alive(pid) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if alive(pid) {
					t.Errorf("%s: pid %d outlived its instruction by a second", name, pid)
				}
			}
		})
	}
}

func TestSandboxReadOnlyRefusesWorkspaceWrites(t *testing.T) {
	d := startSandboxed(t, "--sandbox", "read-only")
	if out, errOut, code := d.run(t, "echo x > "+filepath.Join(d.ws, "f")); code == 0 || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("a workspace write in read-only: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := d.run(t, `echo x > "$TMPDIR/f" && cat `+filepath.Join(d.ws, "..", filepath.Base(d.ws))+"/ -la >/dev/null 2>&1; ls "+d.ws); code != 0 {
		t.Errorf("TMPDIR and reads in read-only: exit %d %q", code, errOut)
	}
}

// --sandbox off behaves as before, the key and the reaping aside: the
// command reads what the user can, and serve says so at start.
func TestSandboxOffIsUnconfinedButSaysSo(t *testing.T) {
	d := startSandboxed(t, "--sandbox", "off")
	out, errOut, code := d.run(t, "cat "+filepath.Join(d.state, device.KeyFile)+" && echo x > "+filepath.Join(d.outer, "f"))
	if code != 0 || out != d.key(t) {
		t.Errorf("off: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(d.outer, "f")); err != nil {
		t.Errorf("off: a write outside every root did not land: %v", err)
	}
	if out, _, _ := d.run(t, "env | grep -c '^SEMA_'"); strings.TrimSpace(out) != "0" {
		t.Errorf("SEMA_ variables reach the command in off: %q", out)
	}
	if n := strings.Count(d.serve.stderr.String(), "commands run unconfined"); n != 1 {
		t.Errorf("serve said %d times that commands are unconfined:\n%s", n, d.serve.stderr)
	}
}

// --sandbox-network off refuses a TCP connect to the lane's own port that
// on allows; unix sockets and the rest are unaffected.
func TestSandboxNetworkOff(t *testing.T) {
	connect := fmt.Sprintf("SEMA_API_KEY=sk_wrong %s devices --server ", semaBin)
	for _, network := range []string{"on", "off"} {
		t.Run(network, func(t *testing.T) {
			d := startSandboxed(t, "--sandbox-network", network)
			_, errOut, _ := d.run(t, connect+d.s.url)
			refused := strings.Contains(errOut, "socket: permission denied")
			if refused != (network == "off") {
				t.Errorf("network %s: a connect to the lane said %q", network, errOut)
			}
		})
	}
}

// The same rules through MCP run_command.
func TestSandboxThroughMCP(t *testing.T) {
	d := startSandboxed(t)
	cs, _ := mcpStdio(t, d.s)
	var r mcp.RunResult
	callTool(t, cs, "run_command", map[string]any{"command": "cat " + filepath.Join(d.state, device.KeyFile) + "; cat " +
		filepath.Join(d.home, ".ssh", "id_ed25519") + "; env | grep -c '^SEMA_'; echo x > " + filepath.Join(d.outer, "f")}, &r)
	if r.ExitCode == 0 || strings.Contains(r.Stdout, d.key(t)) || strings.Contains(r.Stdout, "SSH-PRIVATE") ||
		strings.TrimSpace(r.Stdout) != "0" || strings.Count(r.Stderr, "Permission denied") != 3 {
		t.Errorf("run_command: %+v", r)
	}
}

// A command cannot reach the executor through any of its threads: not the
// one that started the command inside the command's own Landlock domain
// (which a kill of the executor's pid never names), in every mode, off
// included. Each thread's environment and memory stay unreadable, and a
// signal aimed at a thread's id (kill, which the kernel takes as the whole
// process) is refused.
func TestSandboxCommandCannotReachTheExecutorThroughItsThreads(t *testing.T) {
	for _, mode := range []string{"workspace-write", "off"} {
		t.Run(mode, func(t *testing.T) {
			d := startSandboxed(t, "--sandbox", mode)
			script := `for t in /proc/$PPID/task/*; do tid=${t##*/}
				cat $t/environ && echo "environ of $tid read"
				dd if=$t/mem bs=1 count=1 skip=4194304 >/dev/null 2>&1 && echo "memory of $tid read"
				kill -0 $tid && echo "thread $tid signalled"
			done; true`
			if mode == "off" && os.Geteuid() == 0 {
				// A root executor's commands keep every capability in off
				// (docs/executor.md), CAP_SYS_PTRACE among them: only the
				// signals are kept from them there.
				script = `for t in /proc/$PPID/task/*; do tid=${t##*/}; kill -0 $tid && echo "thread $tid signalled"; done; true`
			}
			out, errOut, code := d.run(t, script)
			if code != 0 || strings.Contains(out, " read") || strings.Contains(out, "signalled") || strings.Contains(out+errOut, sandboxTestKey) {
				t.Errorf("exit %d, stdout %q, stderr %q: want every thread out of reach", code, out, errOut)
			}
			if out, errOut, code := d.run(t, `kill -9 $(ls /proc/$PPID/task)`); code == 0 {
				t.Errorf("a SIGKILL to the executor's threads: exit 0 %q %q", out, errOut)
			}
			select {
			case <-d.serve.done:
				t.Fatalf("serve was killed by a command: %v\n%s", d.serve.err, d.serve.stderr)
			default:
			}
			if out, _, code := d.run(t, "echo alive"); code != 0 || out != "alive\n" {
				t.Errorf("after the attempts: exit %d %q", code, out)
			}
		})
	}
}

// A confined command has no controlling terminal, even when serve runs in
// one: through /dev/tty it could read what the user types there, and push
// input into it (TIOCSTI) that the user's shell runs, unconfined, once serve
// ends. Opening /dev/tty fails with the kernel's ENXIO.
func TestSandboxCommandHasNoControllingTerminal(t *testing.T) {
	ptmx, pts := openPTY(t)
	go func() { _, _ = io.Copy(io.Discard, ptmx) }() // the terminal's screen
	d := startSandboxedOn(t, pts)
	out, errOut, code := d.run(t, `echo written > /dev/tty && echo "/dev/tty opened"`)
	if code == 0 || strings.Contains(out, "opened") || !strings.Contains(errOut, "No such device or address") {
		t.Errorf("exit %d, stdout %q, stderr %q: want /dev/tty refused (ENXIO)", code, out, errOut)
	}
}

// openPTY opens a pseudo-terminal pair: its master and its slave.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// --deny-read hides one more path, --allow-read gives a default credential
// store back, and a store the user makes after serve started is hidden the
// moment it exists.
func TestSandboxDenyReadAllowReadAndStoresMadeLater(t *testing.T) {
	ws := t.TempDir()
	private := filepath.Join(ws, "private")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "notes"), []byte("PRIVATE-NOTES"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startSandboxed(t, "--deny-read", private, "--allow-read", "~/.ssh")
	if out, errOut, code := d.run(t, "cat "+filepath.Join(private, "notes")); code == 0 || strings.Contains(out, "PRIVATE") || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("--deny-read: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := d.run(t, "cat "+filepath.Join(d.home, ".ssh", "id_ed25519")); code != 0 || out != "SSH-PRIVATE" {
		t.Errorf("--allow-read ~/.ssh: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	aws := filepath.Join(d.home, ".aws")
	if err := os.Mkdir(aws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aws, "credentials"), []byte("AWS-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.run(t, "cat "+filepath.Join(aws, "credentials")); code == 0 || strings.Contains(out, "AWS-SECRET") || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("~/.aws made after serve started: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
