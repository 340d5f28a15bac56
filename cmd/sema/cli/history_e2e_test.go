package cli_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/mcp"
)

// historyRows is `sema history --json`, decoded.
func historyRows(t *testing.T, s *laneServer, args ...string) []api.InstructionRecord {
	t.Helper()
	out, errOut, code := s.sema(t, nil, append([]string{"history", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("history --json: exit %d: %s", code, errOut)
	}
	var rows []api.InstructionRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r api.InstructionRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("history --json printed %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// The lane's history through the real binaries: a `sema run` that
// succeeds, one that exits 3, an MCP run_command, a write and an
// instruction denied on the approval device each appear exactly once in
// `sema history`, with their outcome and exit code; nothing of their
// output or content is ever in the registry.
func TestHistoryShowsEachInstructionOnceWithItsOutcome(t *testing.T) {
	c := ctx(t)
	sim, sock, dir := startSimInShortDir(t)
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, []byte(`{"rules":[{"kinds":["execStream"],"commands":["touch *"]}]}`), 0o600)
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	_, id, _ := enrollAndServe(t, s, ws, "--approve", "unix:"+sock, "--approval-policy", policy)
	sim.out.waitFor(c, t, "host connected")

	if _, _, code := s.sema(t, nil, "run", "--device", id, "--", "echo history-one-output"); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	if _, _, code := s.sema(t, nil, "run", "--device", id, "--", "exit 3"); code != 3 {
		t.Fatalf("run exit 3: exit %d", code)
	}
	cs, _ := mcpStdio(t, s)
	var r mcp.RunResult
	callTool(t, cs, "run_command", map[string]any{"command": "echo via-mcp"}, &r)
	if _, _, code := s.sema(t, strings.NewReader("secret file content"), "fs", "put", "--device", id, "-", "put.txt"); code != 0 {
		t.Fatalf("fs put: exit %d", code)
	}
	marker := filepath.Join(dir, "ran")
	denied := startProc(t, s.env(t), nil, "run", "--device", id, "--", "touch "+marker)
	sim.out.waitFor(c, t, "pending r1: Run: touch "+marker)
	io.WriteString(sim.keys, "d\n")
	denied.wait(t)

	want := map[string]struct {
		outcome string
		exit    int // -1: none
	}{
		"echo history-one-output": {"ok", 0},
		"exit 3":                  {"ok", 3},
		"echo via-mcp":            {"ok", 0},
		"touch " + marker:         {"permission_denied", -1},
		filepath.Join(ws, "put.txt") + " (19 bytes)": {"ok", -1},
	}
	var rows []api.InstructionRecord
	waitFor(t, "the history to hold the five instructions", func() bool {
		rows = historyRows(t, s)
		return len(rows) >= len(want)
	})
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Summary]++
		w, ok := want[r.Summary]
		if !ok {
			t.Errorf("a row for an instruction nobody sent: %+v", r)
			continue
		}
		exit := -1
		if r.ExitCode != nil {
			exit = *r.ExitCode
		}
		if r.Outcome != w.outcome || exit != w.exit || r.DeviceID != id || r.IdentityID == "" || r.APIKeyID == "" || r.RemoteAddr == "" {
			t.Errorf("%q: outcome %s exit %d (want %s %d), row %+v", r.Summary, r.Outcome, exit, w.outcome, w.exit, r)
		}
	}
	for summary := range want {
		if seen[summary] != 1 {
			t.Errorf("%q is in the history %d times, want exactly once", summary, seen[summary])
		}
	}
	if one := rows[0]; one.StdoutBytes != int64(len("history-one-output\n")) {
		t.Errorf("the first row counts %d bytes of stdout, want %d", one.StdoutBytes, len("history-one-output\n"))
	}
	for _, f := range []string{"sema.db", "sema.db-wal"} {
		raw, _ := os.ReadFile(filepath.Join(s.data, f))
		if strings.Contains(string(raw), "history-one-output\n") || strings.Contains(string(raw), "secret file content") {
			t.Errorf("the registry's %s holds a command's output or a file's content", f)
		}
	}

	// The table, a device by name, one row in full.
	out, errOut, code := s.sema(t, nil, "history", "--device", id)
	if code != 0 {
		t.Fatalf("history: exit %d %s", code, errOut)
	}
	for _, h := range []string{"WHEN", "DEVICE", "WHO", "WHAT", "OUTCOME", "EXIT", "DURATION", "exit 3", "permission_denied"} {
		if !strings.Contains(out, h) {
			t.Errorf("the table does not show %q:\n%s", h, out)
		}
	}
	if rows := historyRows(t, s, "--since", "1h"); len(rows) != len(want) {
		t.Errorf("--since 1h: %d rows, want %d", len(rows), len(want))
	}
	out, errOut, code = s.sema(t, nil, "history", "show", rows[1].InstructionID)
	if code != 0 || !strings.Contains(out, "exit 3") || !strings.Contains(out, rows[1].InstructionID) {
		t.Fatalf("history show: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "history", "show", "ins_none"); code != 1 || !strings.Contains(errOut, "instruction.not_found") {
		t.Fatalf("history show of an unknown id: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "history", "--since", "yesterday"); code != 2 || !strings.Contains(errOut, "--since") {
		t.Fatalf("history --since yesterday: exit %d %s", code, errOut)
	}

	// -f prints what settles after it started.
	follow := startProc(t, s.env(t), nil, "history", "-f", "--json")
	waitFor(t, "history -f to print the past", func() bool { return strings.Count(follow.stdout.String(), "\n") >= len(want) })
	if _, _, code := s.sema(t, nil, "run", "--device", id, "--", "echo followed"); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	waitFor(t, "history -f to print the new row", func() bool { return strings.Contains(follow.stdout.String(), `"summary":"echo followed"`) })
}
