package cli_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/nexting/bleadapter"
	"github.com/sema-agent/sema/protocol"
)

// The approval and sandbox flags are checked before serve touches its
// state dir: a bad one is a usage error whether or not a device is
// enrolled.
func TestServeApproveAndSandboxFlags(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(policy, []byte(`{"rules":[{"kinds":["shell"]}]}`), 0o600)
	ble := "not available in this build"
	if bleadapter.Supported {
		ble = "holds no enrolled device" // the flags passed; serve stopped at the next check
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--approve", "serial:ttyACM0"}, cli.ExitUsage, "absolute"},
		{[]string{"--approve", "serial:/dev/ttyACM0@fast"}, cli.ExitUsage, "baud rate"},
		{[]string{"--approve", "ble:AA:BB:CC:DD:EE:FF"}, cli.ExitFailure, ble},
		{[]string{"--approve", "ble:AA:BB"}, cli.ExitUsage, "six two-digit hex bytes"},
		{[]string{"--approve", "tcp:127.0.0.1:9"}, cli.ExitUsage, "unknown kind"},
		{[]string{"--approve", "unix:relative.sock"}, cli.ExitUsage, "absolute"},
		{[]string{"--approval-policy", policy}, cli.ExitUsage, "--approval-policy needs --approve"},
		{[]string{"--approve", "unix:/nowhere.sock", "--approval-policy", policy}, cli.ExitFailure, `"shell" is not an instruction kind`},
		{[]string{"--approve", "unix:/nowhere.sock", "--approval-policy", policy + ".missing"}, cli.ExitFailure, "no such file"},
		{[]string{"--sandbox", "bogus"}, cli.ExitUsage, `unknown sandbox mode "bogus"`},
		{[]string{"--sandbox", ""}, cli.ExitUsage, "unknown sandbox mode"},
		{[]string{"--sandbox-network", "maybe"}, cli.ExitUsage, `--sandbox-network "maybe": want on or off`},
	} {
		var errOut bytes.Buffer
		cli.Stderr = &errOut
		code := cli.Run(t.Context(), append([]string{"device", "serve", "--state-dir", filepath.Join(t.TempDir(), "none")}, c.args...))
		cli.Stderr = os.Stderr
		if code != c.code || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("%v: exit %d, %q; want exit %d mentioning %q", c.args, code, errOut.String(), c.code, c.msg)
		}
	}
}

// simProc is a real `sema nexting sim` process, driven through its stdin.
type simProc struct {
	cmd  *exec.Cmd
	keys io.WriteCloser
	out  *nxOutput
	done chan struct{}
}

func startSim(t *testing.T, sock string) *simProc {
	t.Helper()
	p := &simProc{cmd: exec.Command(semaBin, "nexting", "sim", "--listen", "unix:"+sock), out: &nxOutput{ch: make(chan struct{}, 1)}, done: make(chan struct{})}
	p.cmd.Stdout = p.out
	var err error
	if p.keys, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// startSimInShortDir starts the simulator on a socket in a fresh short
// directory (unix socket paths are short; t.TempDir can be too long) and
// waits until it listens. The directory is removed when the test ends.
func startSimInShortDir(t *testing.T) (sim *simProc, sock, dir string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "s.sock")
	sim = startSim(t, sock)
	sim.out.waitFor(ctx(t), t, "listening on unix:"+sock)
	return sim, sock, dir
}

// The whole flow with binaries: a real `sema device serve --approve` and a
// real `sema nexting sim`, the lane faked. Deny refuses the command, allow
// runs it, and the logs carry no command text.
func TestServeWithTheSimulator(t *testing.T) {
	c := ctx(t)
	sim, sock, _ := startSimInShortDir(t)

	l := fakelane.New(t, "")
	stateDir, _ := enrolledDevice(t, l)
	markerDir := t.TempDir() // outside the workspace: the commands need it writable
	p := startServe(t, stateDir, "--approve", "unix:"+sock, "--allow-path", markerDir)
	conn, err := l.Next(c)
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, p.stderr)
	}
	if err := conn.Handshake(c, 5, 15000, nil, nil); err != nil {
		t.Fatal(err)
	}
	conn.AutoAck(true)
	sim.out.waitFor(c, t, "host connected")

	marker := filepath.Join(markerDir, "ran")
	run := func(cmd string) string {
		id := ids.New(ids.Instruction)
		conn.Send(&protocol.Instruction{Gen: 5, InstructionID: id, RootSessionID: "s", Kind: protocol.KindExec,
			Args: protocol.CommandArgs{Command: cmd}, TimeoutMs: 60000})
		return id
	}
	denied := run("echo SECRET-1 > " + marker)
	sim.out.waitFor(c, t, "pending r1: Run: echo SECRET-1 > "+marker)
	io.WriteString(sim.keys, "d\n")
	res, err := l.Ledger.WaitResult(c, denied)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := res.Outcome.(protocol.Failure); !ok || f.ErrorCode != protocol.ErrPermissionDenied || !strings.Contains(f.Message, "denied") {
		t.Fatalf("denied: %+v", res.Outcome)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("a denied command ran")
	}

	allowed := run("echo SECRET-2 > " + marker)
	sim.out.waitFor(c, t, "pending r2: Run: echo SECRET-2 > "+marker)
	io.WriteString(sim.keys, "a\n")
	res, err = l.Ledger.WaitResult(c, allowed)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := res.Outcome.(protocol.ExecOutcome); !ok || o.ExitCode != 0 {
		t.Fatalf("allowed: %+v", res.Outcome)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "SECRET-2\n" {
		t.Fatalf("side effect %q %v", b, err)
	}

	io.WriteString(sim.keys, "q")
	<-sim.done
	if logs := p.stderr.String(); strings.Contains(logs, "SECRET") {
		t.Errorf("serve's logs carry command text:\n%s", logs)
	}
	if !strings.Contains(p.stderr.String(), "approval device connected") {
		t.Errorf("serve did not log the device:\n%s", p.stderr)
	}
}

// A piped stdin costs one approval: its upload to the executor's temporary
// directory and its removal ride on the command's approval, through the
// real binaries. The journal records the command's approval.
func TestAPipedStdinCostsOneApproval(t *testing.T) {
	sim, sock, _ := startSimInShortDir(t)
	s := startServer(t, t.TempDir())
	stateDir, id, _ := enrollAndServe(t, s, t.TempDir(), "--approve", "unix:"+sock)
	sim.out.waitFor(ctx(t), t, "host connected")
	run := startProc(t, s.env(t), strings.NewReader("piped\n"), "run", "--device", id, "--", "cat")
	sim.out.waitFor(ctx(t), t, "pending r1: Run: ")
	io.WriteString(sim.keys, "a\n")
	if code := run.wait(t); code != 0 || run.stdout.String() != "piped\n" {
		t.Fatalf("run: exit %d, %q, %s", code, run.stdout, run.stderr)
	}
	if strings.Contains(sim.out.String(), "pending r2") {
		t.Fatalf("a piped stdin asked more than once:\n%s", sim.out)
	}
	var out string
	waitFor(t, "the journal to hold the stdin file's removal", func() bool { // flushed every 50 ms
		out, _, _ = s.sema(t, nil, "device", "log", "--state-dir", stateDir)
		return strings.Contains(lineWith(out, "remove"), " ok ")
	})
	if !strings.Contains(lineWith(out, "execStream"), "allowed") || strings.Contains(lineWith(out, "remove"), "allowed") {
		t.Errorf("the journal records a decision for what was not asked, or none for what was:\n%s", out)
	}
}
