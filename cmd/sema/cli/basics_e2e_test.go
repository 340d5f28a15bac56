package cli_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// The basics a user of ssh, scp and ls expects, through the real binary:
// --version, ls of the workspace root by default, -l, --json on run, ls and
// stat, rm and mkdir of several paths, put -p.
func TestTheBasics(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		p := startProc(t, nil, nil, args...)
		if code := p.wait(t); code != 0 || !strings.HasPrefix(p.stdout.String(), "sema ") {
			t.Errorf("%q: exit %d: %q %s", args, code, p.stdout, p.stderr)
		}
	}
	p := startProc(t, nil, nil, "version", "--json")
	var v struct{ Version, Go string }
	if code := p.wait(t); code != 0 || json.Unmarshal([]byte(p.stdout.String()), &v) != nil || v.Version == "" || v.Go == "" {
		t.Errorf("version --json: exit %d: %q", code, p.stdout)
	}

	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	sema := func(args ...string) string {
		t.Helper()
		out, errOut, code := s.sema(t, nil, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
		return out
	}

	sema("fs", "mkdir", "a", "b", "c")
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("hello"), 0o640)
	if got := sema("fs", "ls"); got != "a/\nb/\nc/\nf.txt\n" {
		t.Errorf("fs ls: %q", got)
	}
	if got := sema("fs", "ls", "-l"); !strings.Contains(got, "0640  file  5") || !strings.Contains(got, "f.txt\n") {
		t.Errorf("fs ls -l: %q", got)
	}
	var list struct {
		Path    string
		Entries []struct {
			Path string
			Kind string
			Size int64
		}
	}
	if err := json.Unmarshal([]byte(sema("fs", "ls", "--json")), &list); err != nil || list.Path != ws || len(list.Entries) != 4 || list.Entries[3].Size != 5 {
		t.Errorf("fs ls --json: %v %+v", err, list)
	}
	var info struct {
		Path, Kind string
		Size       int64
		Mode       uint32
	}
	if err := json.Unmarshal([]byte(sema("fs", "stat", "--json", "f.txt")), &info); err != nil || info.Kind != "file" || info.Size != 5 || info.Mode&0o777 != 0o640 {
		t.Errorf("fs stat --json: %v %+v", err, info)
	}

	// rm of several paths; one the device refuses does not stop the rest.
	_, errOut, code := s.sema(t, nil, "fs", "rm", "a", "nope", "b")
	if code != cli.ExitFailure || strings.Count(errOut, "sema: ") != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("rm a nope b: exit %d: %s", code, errOut)
	}
	if got := sema("fs", "ls"); got != "c/\nf.txt\n" {
		t.Errorf("after rm a nope b: %q", got)
	}

	// put -p makes the missing parents; without -p the device says no.
	local := filepath.Join(t.TempDir(), "x")
	os.WriteFile(local, []byte("deep"), 0o600)
	if _, errOut, code := s.sema(t, nil, "fs", "put", local, "d/e/x"); code != cli.ExitFailure || !strings.Contains(errOut, "not_found") {
		t.Errorf("put to a missing dir: exit %d: %s", code, errOut)
	}
	sema("fs", "put", "-p", local, "d/e/x")
	if b, err := os.ReadFile(filepath.Join(ws, "d/e/x")); err != nil || string(b) != "deep" {
		t.Errorf("put -p: %q %v", b, err)
	}

	// run --json: the lane's events, one JSON object a line, the exit code
	// still the command's.
	out, _, code := s.sema(t, nil, "run", "--json", "echo hi; exit 3")
	var events []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev struct{ Event string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("run --json printed %q: %v", sc.Text(), err)
		}
		events = append(events, ev.Event)
	}
	if code != 3 || strings.Join(events, " ") != "accepted chunk chunk outcome" {
		t.Errorf("run --json: exit %d, events %v:\n%s", code, events, out)
	}
}
