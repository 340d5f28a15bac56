package cli_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"

	"go.uber.org/goleak"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/syncbuf"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

var semaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sema-cli-test")
	if err != nil {
		panic(err)
	}
	semaBin = filepath.Join(dir, "sema")
	// No test reads or writes the user's own saved login.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	out, err := exec.Command("go", "build", "-o", semaBin, "github.com/sema-agent/sema/cmd/sema").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building sema: %v\n%s", err, out)
		os.Exit(1)
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		code = m.Run()
		if code == 0 {
			if err := goleak.Find(goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener")); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}
	}()
	os.Exit(code)
}

// enrolledDevice writes a state dir (key, record) for a device the fake
// lane knows.
func enrolledDevice(t *testing.T, l *fakelane.Lane) (dir, deviceID string) {
	t.Helper()
	dir = t.TempDir()
	priv, err := device.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := device.WriteKey(dir, priv); err != nil {
		t.Fatal(err)
	}
	deviceID = ids.New(ids.Device)
	if err := device.WriteRecord(dir, device.Record{DeviceID: deviceID, Server: l.URL(), WorkspaceRoot: t.TempDir(), EnrolledAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.AddDevice(deviceID, priv.Public().(ed25519.PublicKey))
	return dir, deviceID
}

// proc is a running sema process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error
}

func startProc(t *testing.T, env []string, stdin io.Reader, args ...string) *proc {
	t.Helper()
	return startProcAttr(t, env, stdin, nil, args...)
}

// startProcAttr is startProc with the process's attributes (its session
// and controlling terminal).
func startProcAttr(t *testing.T, env []string, stdin io.Reader, sys *syscall.SysProcAttr, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(semaBin, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr, p.cmd.Stdin = p.stdout, p.stderr, stdin
	p.cmd.SysProcAttr = sys
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait returns the exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not exit; stdout:\n%s\nstderr:\n%s", p.cmd.Args, p.stdout, p.stderr)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

type syncBuffer = syncbuf.Buffer

// startServe runs a real `sema device serve` with its own machine-wide
// lock dir; extra flags follow the state dir.
func startServe(t *testing.T, dir string, flags ...string) *proc {
	t.Helper()
	return startProc(t, []string{"TMPDIR=" + t.TempDir()}, nil, append([]string{"device", "serve", "--state-dir", dir}, flags...)...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// SIGTERM to a real sema: goodbye shutdown, the in-flight command finishes,
// its result is delivered, exit 0 — and no command output in the logs.
func TestServeSIGTERM(t *testing.T) {
	l := fakelane.New(t, "")
	dir, _ := enrolledDevice(t, l)
	p := startServe(t, dir)
	c, err := l.Next(ctx(t))
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, p.stderr)
	}
	if err := c.Handshake(ctx(t), 5, 15000, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.AutoAck(true)
	gate := filepath.Join(t.TempDir(), "go")
	id := ids.New(ids.Instruction)
	c.Send(&protocol.Instruction{Gen: 5, InstructionID: id, RootSessionID: "s", Kind: protocol.KindExec,
		Args: protocol.CommandArgs{Command: fmt.Sprintf("echo SECRET-OUTPUT-1; while [ ! -e %s ]; do sleep 0.02; done; echo SECRET-OUTPUT-2", gate)}, TimeoutMs: 60000})
	if err := l.Ledger.WaitOutput(ctx(t), id, "SECRET-OUTPUT-1"); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	f, err := c.WaitFrame(ctx(t), func(f protocol.DeviceFrame) bool { _, ok := f.(*protocol.Goodbye); return ok })
	if err != nil {
		t.Fatal(err)
	}
	if g := f.(*protocol.Goodbye); g.Reason != protocol.GoodbyeShutdown {
		t.Errorf("goodbye %+v", g)
	}
	os.WriteFile(gate, nil, 0o600)
	r, err := l.Ledger.WaitResult(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := r.Outcome.(protocol.ExecOutcome); !ok || o.ExitCode != 0 {
		t.Errorf("outcome %+v", r.Outcome)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr)
	}
	logs := p.stderr.String()
	if strings.Contains(logs, "SECRET-OUTPUT") || strings.Contains(logs, "while [") {
		t.Errorf("the logs carry command text or output:\n%s", logs)
	}
	st, err := os.ReadFile(filepath.Join(dir, device.StatusFile))
	if err != nil || !strings.Contains(string(st), `"stopped": true`) {
		t.Errorf("status file: %s %v", st, err)
	}
}

// A second serve of the same device exits at once, saying so.
func TestServeLockContention(t *testing.T) {
	l := fakelane.New(t, "")
	dir, deviceID := enrolledDevice(t, l)
	first := startServe(t, dir)
	c, err := l.Next(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Handshake(ctx(t), 1, 15000, nil, nil); err != nil {
		t.Fatal(err)
	}
	second := startServe(t, dir)
	if code := second.wait(t); code != cli.ExitLocked {
		t.Fatalf("second serve exit %d, want %d; stderr:\n%s", code, cli.ExitLocked, second.stderr)
	}
	msg := second.stderr.String()
	if !strings.Contains(msg, "already serving device "+deviceID) || !strings.Contains(msg, "process "+strconv.Itoa(first.cmd.Process.Pid)) {
		t.Errorf("second serve said:\n%s", msg)
	}
	if n := l.Dials(); n != 1 {
		t.Errorf("%d dials: the second serve reached the lane", n)
	}
	first.cmd.Process.Signal(syscall.SIGTERM)
	if code := first.wait(t); code != 0 {
		t.Errorf("first serve exit %d", code)
	}
}

func TestServeRefusesAReadableKey(t *testing.T) {
	l := fakelane.New(t, "")
	dir, _ := enrolledDevice(t, l)
	os.Chmod(filepath.Join(dir, device.KeyFile), 0o644)
	p := startServe(t, dir)
	if code := p.wait(t); code != cli.ExitFailure {
		t.Fatalf("exit %d", code)
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "chmod 600") || !strings.Contains(msg, "group or others can read it") {
		t.Errorf("said:\n%s", msg)
	}
	if l.Dials() != 0 {
		t.Error("it dialled the lane with an exposed key")
	}
}

// The terminal ends have their own exit codes; revoked deletes the key.
func TestServeTerminalExitCodes(t *testing.T) {
	min := 2
	cases := []struct {
		name string
		end  func(c *fakelane.Conn)
		code int
	}{
		{"helloReject revoked", func(c *fakelane.Conn) { c.Reject(protocol.RejectRevoked, nil) }, cli.ExitRevoked},
		{"bye revoked", func(c *fakelane.Conn) {
			c.Handshake(context.Background(), 1, 15000, nil, nil)
			c.Bye(protocol.ByeRevoked)
		}, cli.ExitRevoked},
		{"bye superseded", func(c *fakelane.Conn) {
			c.Handshake(context.Background(), 1, 15000, nil, nil)
			c.Bye(protocol.ByeSuperseded)
		}, cli.ExitSuperseded},
		{"protocol_version_unsupported", func(c *fakelane.Conn) { c.Reject(protocol.RejectProtocolVersionUnsupported, &min) }, cli.ExitUpgrade},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := fakelane.New(t, "")
			dir, _ := enrolledDevice(t, l)
			p := startServe(t, dir)
			c, err := l.Next(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			tc.end(c)
			if code := p.wait(t); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, p.stderr)
			}
			_, keyErr := os.Stat(filepath.Join(dir, device.KeyFile))
			if tc.code == cli.ExitRevoked {
				if !os.IsNotExist(keyErr) {
					t.Error("the key survived a revocation")
				}
				if !strings.Contains(p.stderr.String(), "Enroll again") {
					t.Errorf("said:\n%s", p.stderr)
				}
				again := startServe(t, dir)
				if code := again.wait(t); code != cli.ExitRevoked {
					t.Errorf("serve after revocation: exit %d", code)
				}
			} else if keyErr != nil {
				t.Errorf("the key is gone: %v", keyErr)
			}
		})
	}
}

// enroll through the CLI, against the lane's real HTTP handler.
func TestEnrollCommand(t *testing.T) {
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := lane.New(lane.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(srv))
	defer srv.Shutdown(context.Background())
	defer hs.Close()
	_, apiKey, err := lane.CreateIdentity(t.Context(), st, "user")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(cli.EnvAPIKey, apiKey)
	var out, errOut bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &errOut
	t.Cleanup(func() { cli.Stdout, cli.Stderr = os.Stdout, os.Stderr })

	dir := t.TempDir()
	code := cli.Run(t.Context(), []string{"device", "enroll", "--server", hs.URL, "--token", "set_unknown", "--workspace", t.TempDir(), "--state-dir", dir})
	if code != cli.ExitFailure || !strings.Contains(errOut.String(), api.EnrollmentInvalidText) {
		t.Fatalf("bad token: exit %d, said %q", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "set_unknown") {
		t.Error("the token was printed")
	}

	token := issueToken(t, hs.URL, apiKey)
	out.Reset()
	errOut.Reset()
	cli.Stdin = strings.NewReader(token + "\n")
	t.Cleanup(func() { cli.Stdin = os.Stdin })
	code = cli.Run(t.Context(), []string{"device", "enroll", "--server", hs.URL, "--token", "-", "--workspace", t.TempDir(), "--name", "box", "--state-dir", dir})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	id := strings.TrimSpace(out.String())
	rec, err := device.LoadRecord(dir)
	if err != nil || rec.DeviceID != id || !strings.HasPrefix(id, "dev_") {
		t.Fatalf("printed %q, stored %+v %v", id, rec, err)
	}
	if strings.Contains(errOut.String(), token) {
		t.Error("the token was printed")
	}
}

func TestUsageErrors(t *testing.T) {
	var errOut bytes.Buffer
	cli.Stderr = &errOut
	t.Cleanup(func() { cli.Stderr = os.Stderr })
	for _, args := range [][]string{{"device", "serve", "--nope"}, {"device", "enroll"}, {"device"}} {
		if code := cli.Run(t.Context(), args); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}
