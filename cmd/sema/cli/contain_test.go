package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
)

// Through the real binaries: containment is on by
// default, and the device's own files never leave through the lane.
func TestServeContainsByDefault(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	stateDir, _, serve := enrollAndServe(t, s, ws)
	key, err := os.ReadFile(filepath.Join(stateDir, device.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(serve.stderr.String(), "allowed_roots="+ws+":") {
		t.Errorf("serve does not say what it serves:\n%s", serve.stderr)
	}
	refused := func(why string, args ...string) {
		t.Helper()
		out, errOut, code := s.sema(t, nil, args...)
		want := cli.ExitFailure // fs: the device said no
		if args[0] == "run" {
			want = cli.ExitNeverStarted // run: never started (the README exit table)
		}
		if code != want || !strings.Contains(errOut, "permission_denied") || !strings.Contains(errOut, why) {
			t.Errorf("%v: exit %d, stderr %q; want %d, permission_denied, %q", args, code, errOut, want, why)
		}
		if strings.Contains(out, "PRIVATE KEY") || strings.Contains(errOut, "PRIVATE KEY") {
			t.Fatalf("%v printed the key", args)
		}
	}
	// "sema fs cat <state-dir>/device.key prints the PEM (exit 0)": no more.
	refused("never served", "fs", "cat", filepath.Join(stateDir, device.KeyFile))
	refused("never served", "fs", "ls", stateDir)
	refused("never served", "fs", "put", "-", filepath.Join(stateDir, device.RecordFile))
	// Outside the workspace and the temp kinds' directory.
	refused("--allow-path /etc", "fs", "cat", "/etc/hostname")
	refused("outside every allowed root", "fs", "put", "-", "/tmp/"+filepath.Base(ws)+"-x")
	refused("outside every allowed root", "run", "--cwd", "/etc", "--", "true")
	// "sema fs rm -r . deletes the workspace root itself (exit 0)": no more.
	refused("allowed root", "fs", "rm", "-r", ".")
	if _, err := os.Stat(ws); err != nil {
		t.Fatalf("the workspace is gone: %v", err)
	}
	if _, err := os.Stat("/tmp/" + filepath.Base(ws) + "-x"); err == nil {
		t.Fatal("a file was written outside containment")
	}
	// Inside, everything works as before.
	if _, errOut, code := s.sema(t, strings.NewReader("ok"), "fs", "put", "-", "inside.txt"); code != 0 {
		t.Fatalf("put inside: %d %s", code, errOut)
	}
	// The command itself is confined by the sandbox: the key is not
	// readable to it, and the kernel's own error says so.
	out, errOut, code := s.sema(t, nil, "run", "--", "cat", filepath.Join(stateDir, device.KeyFile))
	if code == 0 || strings.Contains(out, string(key)) || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("run cat of the key: exit %d, stdout %q, stderr %q; the sandbox must refuse it", code, out, errOut)
	}
}

func TestServeAllowPathWholeFilesystemStillRefusesOwnFiles(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	stateDir, _, serve := enrollAndServe(t, s, ws, "--allow-path", "/")
	if !strings.Contains(serve.stderr.String(), "serving the whole filesystem") {
		t.Errorf("--allow-path / is not said at start:\n%s", serve.stderr)
	}
	host, err := os.ReadFile("/etc/hostname")
	if err != nil {
		t.Skip("no /etc/hostname here")
	}
	if out, errOut, code := s.sema(t, nil, "fs", "cat", "/etc/hostname"); code != 0 || out != string(host) {
		t.Errorf("fs cat /etc/hostname under --allow-path /: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{
		{"fs", "cat", filepath.Join(stateDir, device.KeyFile)},
		{"fs", "cat", "/proc/self/environ"},
		{"fs", "rm", "-r", stateDir},
		{"fs", "rm", "-r", filepath.Dir(stateDir)},
		{"fs", "rm", "-r", filepath.Dir(ws)},
	} {
		out, errOut, code := s.sema(t, nil, args...)
		if code != cli.ExitFailure || !strings.Contains(errOut, "permission_denied") || strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("%v under --allow-path /: exit %d %q", args, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, device.KeyFile)); err != nil {
		t.Fatalf("the key is gone: %v", err)
	}
}

func TestServeAllowPathMustBeADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), file} {
		srv := startServe(t, t.TempDir(), "--allow-path", p)
		if code := srv.wait(t); code != cli.ExitUsage || !strings.Contains(srv.stderr.String(), "--allow-path "+p) {
			t.Errorf("--allow-path %s: exit %d: %s", p, code, srv.stderr)
		}
	}
}
