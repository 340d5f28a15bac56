package cli

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The launchd agent is a well-formed plist that runs the wrapper with the
// binary and the state dir as its arguments, restarted after a non-zero
// exit only.
func TestLaunchdPlist(t *testing.T) {
	p := launchdPlist("/opt/sema & co/sema", "/Users/u/state <dir>", "/Users/u/Library/Logs/sema/device.log")
	d := xml.NewDecoder(strings.NewReader(p))
	var strs []string
	inString := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, p)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inString = tok.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(tok))
			}
		case xml.EndElement:
			inString = false
		}
	}
	want := []string{launchdLabel, "/bin/sh", "-c", launchdScript(), "/opt/sema & co/sema", "/Users/u/state <dir>"}
	for i, w := range want {
		if i >= len(strs) || strs[i] != w {
			t.Fatalf("string %d: got %q, want %q", i, strs, w)
		}
	}
	if !strings.Contains(p, "<key>SuccessfulExit</key>\n\t\t<false/>") {
		t.Errorf("KeepAlive is not SuccessfulExit=false:\n%s", p)
	}
}

// The wrapper maps serve's terminal exits to 0 (not restarted), passes
// the others through, and forwards SIGTERM so that serve shuts down
// gracefully.
func TestLaunchdScript(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "sema")
	os.WriteFile(fake, []byte(`#!/bin/sh
[ "$1 $2 $3" = "device serve --state-dir" ] || exit 99
echo "$4" > "$4/args"
if [ -n "$TRAP" ]; then trap 'echo term > "$4/term"; exit 0' TERM; echo ready > "$4/ready"; while :; do sleep 0.01; done; fi
exit $CODE
`), 0o700)
	for code, want := range map[int]int{0: 0, 1: 1, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0, 7: 7} {
		cmd := exec.Command("/bin/sh", "-c", launchdScript(), fake, dir)
		cmd.Env = append(os.Environ(), "CODE="+strconv.Itoa(code))
		err := cmd.Run()
		got := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			got = ee.ExitCode()
		}
		if got != want {
			t.Errorf("serve exit %d: the wrapper exits %d, want %d (%v)", code, got, want, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "args")); strings.TrimSpace(string(b)) != dir {
		t.Errorf("serve got the state dir %q", b)
	}
	cmd := exec.Command("/bin/sh", "-c", launchdScript(), fake, dir)
	cmd.Env = append(os.Environ(), "TRAP=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake serve never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "term")); err != nil {
		t.Error("SIGTERM did not reach serve")
	}
}

// The enroll line `sema token` prints is one shell command: ~ is left for
// the device's shell, anything else is quoted.
func TestEnrollLine(t *testing.T) {
	for ws, want := range map[string]string{
		"~":            "--workspace ~",
		"~/src":        "--workspace ~/src",
		"~/my src":     "--workspace ~/'my src'",
		"/srv/it's":    `--workspace '/srv/it'\''s'`,
		"/home/u/code": "--workspace /home/u/code",
	} {
		got := enrollLine("http://h:8420", "set_abc-_", ws)
		if got != "sema device enroll --server http://h:8420 --token set_abc-_ "+want {
			t.Errorf("%q: %s", ws, got)
		}
	}
}
