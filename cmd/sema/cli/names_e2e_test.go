package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// --device takes a device's name as well as its id; a name two devices
// have is usage and lists their ids; enroll names a device after its
// machine unless --name says otherwise.
func TestDevicesByName(t *testing.T) {
	s := startServer(t, t.TempDir())
	stateA, idA := enrollWith(t, s, t.TempDir(), "--name", "box")
	startServe(t, stateA)
	waitFor(t, "the device to come online", func() bool { return s.online(t, idA) })
	_, idB := enrollWith(t, s, t.TempDir())

	if out, errOut, code := s.sema(t, nil, "run", "--device", "box", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Fatalf("run --device box: exit %d: %q %s", code, out, errOut)
	}
	host, _ := os.Hostname()
	for _, d := range s.devices(t) {
		if d["deviceId"] == idB && d["displayName"] != host {
			t.Errorf("enroll without --name named it %q, want the host name %q", d["displayName"], host)
		}
	}

	_, idC := enrollWith(t, s, t.TempDir(), "--name", "box")
	_, errOut, code := s.sema(t, nil, "run", "--device", "box", "true")
	if code != cli.ExitUsage || !strings.Contains(errOut, idA) || !strings.Contains(errOut, idC) {
		t.Errorf("an ambiguous name: exit %d: %s", code, errOut)
	}
	_, errOut, code = s.sema(t, nil, "fs", "ls", "--device", "nosuch")
	if code != cli.ExitNeverStarted || !strings.Contains(errOut, `you have no device "nosuch"`) {
		t.Errorf("an unknown name: exit %d: %s", code, errOut)
	}

	// devices rename takes an id or a name, and refuses a shared name as
	// --device does; once renamed, the name is the device's again.
	if _, errOut, code := s.sema(t, nil, "devices", "rename", "box", "other"); code != cli.ExitUsage || !strings.Contains(errOut, idC) {
		t.Errorf("rename by an ambiguous name: exit %d: %s", code, errOut)
	}
	if out, errOut, code := s.sema(t, nil, "devices", "rename", idC, "spare"); code != 0 || out != "renamed "+idC+" to spare\n" {
		t.Fatalf("rename %s spare: exit %d: %q %s", idC, code, out, errOut)
	}
	if out, errOut, code := s.sema(t, nil, "run", "--device", "box", "echo", "again"); code != 0 || out != "again\n" {
		t.Errorf("run --device box after the other box was renamed: exit %d: %q %s", code, out, errOut)
	}
	for _, d := range s.devices(t) {
		if d["deviceId"] == idC && d["displayName"] != "spare" {
			t.Errorf("sema devices shows %s named %q, want spare", idC, d["displayName"])
		}
	}
}
