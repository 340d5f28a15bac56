package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawUnsafe are characters that must never reach the terminal from the
// lane or a device: ESC, BEL, an 8-bit CSI, a bidi override, an isolate.
const rawUnsafe = "\x1b\x07\u009b\u202e\u2066"

func assertEscaped(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	if strings.ContainsAny(out, rawUnsafe) {
		t.Errorf("%s: a raw control or bidi character reached the terminal: %q", what, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: %q does not show %q", what, out, w)
		}
	}
}

// Every string that came from the lane or the device (names, paths,
// messages) reaches the terminal with its control and bidi characters
// escaped; file content and command output are data and stay byte-exact.
func TestLaneAndDeviceTextIsEscaped(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := filepath.Join(t.TempDir(), "ws\x1b[31m\u202e")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	wsShown := `ws\x1b[31m\u202e`
	name := "\x1b]0;pwned\x07evil\u009b2J"
	stateDir, id := enrollWith(t, s, ws, "--name", name)
	serve := startServe(t, stateDir)
	waitFor(t, "the device to come online", func() bool { return s.online(t, id) })
	t.Cleanup(func() { serve.cmd.Process.Kill() })

	out, _, code := s.sema(t, nil, "devices")
	if code != 0 {
		t.Fatalf("devices: exit %d", code)
	}
	assertEscaped(t, "devices", out, `\x1b]0;pwned\aevil\u009b2J`, wsShown)

	out, _, _ = s.sema(t, nil, "devices", "--json")
	assertEscaped(t, "devices --json", out, `\u202e`)
	var list struct {
		Devices []struct{ DisplayName, WorkspaceRoot string }
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Devices) != 1 ||
		list.Devices[0].DisplayName != name || list.Devices[0].WorkspaceRoot != ws {
		t.Errorf("devices --json does not decode to what the lane holds (%v): %s", err, out)
	}

	st := startProc(t, nil, nil, "device", "status", "--state-dir", stateDir)
	st.wait(t)
	assertEscaped(t, "device status", st.stdout.String(), wsShown)

	// A file name planted on the device, and content with escapes in it.
	file := "f\x1b[2J\u2066.txt"
	content := "\x1b[31mred\u202e\x07\n"
	if err := os.WriteFile(filepath.Join(ws, file), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = s.sema(t, nil, "fs", "ls", ".")
	if code != 0 {
		t.Fatalf("ls: exit %d", code)
	}
	assertEscaped(t, "fs ls", out, `f\x1b[2J\u2066.txt`)
	out, _, _ = s.sema(t, nil, "fs", "stat", file)
	assertEscaped(t, "fs stat", out, wsShown+`/f\x1b[2J\u2066.txt`)
	if out, errOut, code := s.sema(t, nil, "fs", "cat", file); code != 0 || out != content {
		t.Errorf("fs cat must be byte-exact: exit %d, %q, %s", code, out, errOut)
	}
	local := filepath.Join(t.TempDir(), "local")
	os.WriteFile(local, []byte("x"), 0o600)
	out, _, _ = s.sema(t, nil, "fs", "put", local, "new\x07.txt")
	assertEscaped(t, "fs put", out, `new\a.txt`)
	_, errOut, code := s.sema(t, nil, "fs", "cat", "missing\x1b[8m.txt")
	if code == 0 {
		t.Errorf("cat of a missing file: exit 0")
	}
	assertEscaped(t, "fs cat error", errOut, `missing\x1b[8m.txt`)

	// Command output is data: byte-exact. An error naming a cwd is escaped.
	if out, errOut, code := s.sema(t, nil, "run", "--", `printf '\033[31mred\007'`); code != 0 || out != "\x1b[31mred\x07" {
		t.Errorf("run output must be byte-exact: exit %d, %q, %s", code, out, errOut)
	}
	_, errOut, _ = s.sema(t, nil, "run", "--cwd", "gone\u202e", "--", "true")
	assertEscaped(t, "run error", errOut, `gone\u202e`)
}
