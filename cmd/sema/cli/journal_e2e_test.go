package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor/journal"
	"github.com/sema-agent/sema/mcp"
)

// The device's own journal through the real binaries: what `sema run` and
// MCP run_command ran shows in `sema device log` with its outcome and exit
// code, `verify` passes, and an edited record fails it, named.
func TestDeviceLogShowsWhatRanAndVerifies(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	stateDir, id, _ := enrollAndServe(t, s, ws)
	if _, _, code := s.sema(t, nil, "run", "--device", id, "--", "echo journal-one"); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	if _, _, code := s.sema(t, nil, "run", "--device", id, "--", "exit 3"); code != 3 {
		t.Fatalf("run exit 3: exit %d", code)
	}
	cs, _ := mcpStdio(t, s)
	var r mcp.RunResult
	callTool(t, cs, "run_command", map[string]any{"command": "echo via-mcp"}, &r)
	if _, _, code := s.sema(t, strings.NewReader("secret file content"), "fs", "put", "-", "put.txt"); code != 0 {
		t.Fatalf("fs put: exit %d", code)
	}

	var records []journal.Record
	waitFor(t, "the journal to hold four ends", func() bool {
		out, _, _ := s.sema(t, nil, "device", "log", "--state-dir", stateDir, "--json")
		records = records[:0]
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var rec journal.Record
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Event == journal.EventEnd {
				records = append(records, rec)
			}
		}
		return len(records) >= 4
	})
	raw, _ := os.ReadFile(filepath.Join(stateDir, journal.FileName))
	if bytes.Contains(raw, []byte("secret file content")) || bytes.Contains(raw, []byte("journal-one\n")) {
		t.Fatal("the journal holds file content or command output")
	}

	out, errOut, code := s.sema(t, nil, "device", "log", "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("device log: exit %d %s", code, errOut)
	}
	for _, want := range []string{"echo journal-one", "exit 3", "echo via-mcp", "put.txt (19 bytes)", "WHEN", "OUTCOME"} {
		if !strings.Contains(out, want) {
			t.Errorf("device log does not show %q:\n%s", want, out)
		}
	}
	if !strings.Contains(lineWith(out, "exit 3"), " 3 ") || !strings.Contains(lineWith(out, "journal-one"), " 0 ") {
		t.Errorf("exit codes:\n%s", out)
	}

	out, errOut, code = s.sema(t, nil, "device", "log", "verify", "--state-dir", stateDir)
	if code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("verify: exit %d %q %q", code, out, errOut)
	}
	if out, _, _ := s.sema(t, nil, "device", "log", "--state-dir", stateDir, "--since", "1h"); !strings.Contains(out, "journal-one") {
		t.Errorf("--since 1h hides what ran now:\n%s", out)
	}
	if out, _, _ := s.sema(t, nil, "device", "log", "--state-dir", stateDir, "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); strings.Contains(out, "journal-one") {
		t.Errorf("--since an hour ahead shows the past:\n%s", out)
	}

	// An edit to a record — the command made to look harmless — is caught.
	path := filepath.Join(stateDir, journal.FileName)
	b, _ := os.ReadFile(path)
	edited := bytes.Replace(b, []byte("echo via-mcp"), []byte("echo harmless"), 1)
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = s.sema(t, nil, "device", "log", "verify", "--state-dir", stateDir)
	if code != 1 || !strings.Contains(errOut, "journal.jsonl:") || !strings.Contains(errOut, "edited") {
		t.Fatalf("verify of an edited journal: exit %d %q", code, errOut)
	}
}

func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
