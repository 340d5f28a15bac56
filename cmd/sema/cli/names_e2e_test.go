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
}
