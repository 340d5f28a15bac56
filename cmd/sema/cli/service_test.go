package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/internal/ids"
)

// fakeEnrollment writes a state dir with a record (and a key), as enroll
// would.
func fakeEnrollment(t *testing.T) (dir, id string) {
	t.Helper()
	dir = t.TempDir()
	priv, err := device.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := device.WriteKey(dir, priv); err != nil {
		t.Fatal(err)
	}
	id = ids.New(ids.Device)
	if err := device.WriteRecord(dir, device.Record{DeviceID: id, Server: "http://127.0.0.1:1", WorkspaceRoot: t.TempDir(), EnrolledAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return dir, id
}

// The unit is written where it is told (never into the real user's
// systemd), runs serve for the state dir, restarts on failure and never on
// serve's terminal exits.
func TestServiceInstallSystemd(t *testing.T) {
	dir, id := fakeEnrollment(t)
	units := t.TempDir()
	t.Setenv(cli.EnvServiceDir, units)
	out, errOut, code := runInProcess(t, "", "device", "service", "install", "--state-dir", dir, "--binary", semaBin)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(units, "sema-device.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	bin, _ := filepath.EvalSymlinks(semaBin)
	for _, want := range []string{
		"ExecStart=\"" + bin + "\" device serve --state-dir \"" + dir + "\"\n",
		"Restart=on-failure\n", "RestartPreventExitStatus=2 3 4 5 6\n", "KillMode=mixed\n",
		"WantedBy=default.target\n", "Description=sema device executor (" + id + ")\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
	for _, want := range []string{"systemctl --user enable --now sema-device.service", "systemctl --user stop sema-device.service",
		"journalctl --user -u sema-device.service -f", "loginctl enable-linger"} {
		if !strings.Contains(out, want) {
			t.Errorf("install did not say %q:\n%s", want, out)
		}
	}

	// --now drives systemctl --user (here a fake that records its calls).
	calls := filepath.Join(t.TempDir(), "calls")
	fake := filepath.Join(t.TempDir(), "systemctl")
	os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\n"), 0o700)
	t.Setenv(cli.EnvSystemctl, fake)
	if _, errOut, code := runInProcess(t, "", "device", "service", "install", "--now", "--state-dir", dir, "--binary", semaBin); code != 0 {
		t.Fatalf("--now: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(calls); string(b) != "--user daemon-reload\n--user enable --now sema-device.service\n" {
		t.Errorf("systemctl calls %q", b)
	}

	// Without a usable systemctl --user, --now says so and fails.
	t.Setenv(cli.EnvSystemctl, filepath.Join(t.TempDir(), "no-systemctl"))
	_, errOut, code = runInProcess(t, "", "device", "service", "install", "--now", "--state-dir", dir, "--binary", semaBin)
	if code != cli.ExitFailure || !strings.Contains(errOut, "systemctl --user is unavailable") {
		t.Errorf("no systemctl: exit %d: %s", code, errOut)
	}
}

func TestServiceInstallRefusals(t *testing.T) {
	t.Setenv(cli.EnvServiceDir, t.TempDir())
	if _, errOut, code := runInProcess(t, "", "device", "service", "install", "--state-dir", t.TempDir(), "--binary", semaBin); code != cli.ExitFailure || !strings.Contains(errOut, "enroll") {
		t.Errorf("not enrolled: exit %d: %s", code, errOut)
	}
	dir, _ := fakeEnrollment(t)
	if err := device.MarkRevoked(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runInProcess(t, "", "device", "service", "install", "--state-dir", dir, "--binary", semaBin); code != cli.ExitRevoked {
		t.Errorf("revoked: exit %d: %s", code, errOut)
	}
	// The test binary is a `go run`-like temporary build.
	dir, _ = fakeEnrollment(t)
	if _, errOut, code := runInProcess(t, "", "device", "service", "install", "--state-dir", dir); code != cli.ExitUsage || !strings.Contains(errOut, "go install") {
		t.Errorf("temporary binary: exit %d: %s", code, errOut)
	}
}

func TestDeviceStatusAndForgetOffline(t *testing.T) {
	dir, id := fakeEnrollment(t)
	out, errOut, code := runInProcess(t, "", "device", "status", "--state-dir", dir)
	if code != cli.ExitFailure || !strings.Contains(out, id) || !strings.Contains(out, "never started here") || !strings.Contains(errOut, "no `sema device serve` is running") {
		t.Errorf("status: exit %d:\n%s%s", code, out, errOut)
	}
	t.Setenv("TMPDIR", t.TempDir())
	out, errOut, code = runInProcess(t, "", "device", "forget", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "forgot device "+id) || !strings.Contains(errOut, "sema devices revoke "+id) {
		t.Fatalf("forget: exit %d: %s %s", code, out, errOut)
	}
	for _, f := range []string{device.KeyFile, device.RecordFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s survived forget", f)
		}
	}
	if out, _, code := runInProcess(t, "", "device", "forget", "--state-dir", dir); code != 0 || !strings.Contains(out, "nothing to forget") {
		t.Errorf("forget again: exit %d: %s", code, out)
	}
	if _, errOut, code := runInProcess(t, "", "device", "status", "--state-dir", dir); code != cli.ExitFailure || !strings.Contains(errOut, "not enrolled") {
		t.Errorf("status after forget: exit %d: %s", code, errOut)
	}
}

// A serve that has said goodbye and is finishing its work says so.
func TestDeviceStatusOfAServeShuttingDown(t *testing.T) {
	dir, id := fakeEnrollment(t)
	st := executor.Status{PID: os.Getpid(), DeviceID: id, Connected: true, Gen: "1", Inflight: []string{"ins_1"}, Stopping: true,
		Since: time.Now(), UpdatedAt: time.Now()}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, device.StatusFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runInProcess(t, "", "device", "status", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "shutting down: goodbye sent") || !strings.Contains(out, "ins_1") {
		t.Errorf("status: exit %d:\n%s%s", code, out, errOut)
	}
}
