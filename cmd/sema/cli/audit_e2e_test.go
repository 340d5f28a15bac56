package cli_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to tamper with the registry

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

var checkpointLines = regexp.MustCompile(`^audit:[0-9]+:[0-9a-f]{64}\nhistory:[0-9]+:[0-9a-f]{64}\n$`)

// exportAudit runs `sema audit export` and reads its lines.
func exportAudit(t *testing.T, s *laneServer, args ...string) []api.AuditEntry {
	t.Helper()
	out, errOut, code := s.sema(t, nil, append([]string{"audit", "export"}, args...)...)
	if code != 0 {
		t.Fatalf("audit export: exit %d %s", code, errOut)
	}
	var rows []api.AuditEntry
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var e api.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("an export line is not a JSON object: %q", line)
		}
		rows = append(rows, e)
	}
	return rows
}

// The audit trail through the real binaries: the admin reads it as a
// table, follows it, exports it as JSON lines whose digests recompute,
// prints a checkpoint and verifies; another identity is refused.
func TestTheAuditTrailIsReadExportedAndVerified(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	bobKey, _, code := s.sema(t, nil, "identity", "create", "bob")
	if code != 0 {
		t.Fatal("identity create bob")
	}
	waitFor(t, "the connection's audit row", func() bool {
		out, _, _ := s.sema(t, nil, "audit", "--event", "device.connected", "--json")
		return strings.Contains(out, id)
	})

	follow := startProc(t, s.env(t), nil, "audit", "-f", "--event", "identity.created")
	out, errOut, code := s.sema(t, nil, "audit", "--since", "1h")
	if code != 0 || !strings.Contains(out, "WHEN") || !strings.Contains(lineWith(out, "device.connected"), id) || !strings.Contains(out, "identity.created") {
		t.Fatalf("audit: exit %d\n%s%s", code, out, errOut)
	}
	// A mistyped event matches no row: said on stderr, not an empty screen.
	if out, errOut, code := s.sema(t, nil, "audit", "--event", "device.connect"); code != 0 || out != "" || !strings.Contains(errOut, `No audit row of event "device.connect"`) {
		t.Fatalf("audit --event device.connect: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := s.semaAs(t, strings.TrimSpace(bobKey), nil, "audit"); code != cli.ExitFailure || !strings.Contains(errOut, "auth.forbidden") {
		t.Fatalf("bob reading the audit trail: exit %d %s", code, errOut)
	}
	if _, _, code := s.sema(t, nil, "identity", "create", "carol"); code != 0 {
		t.Fatal("identity create carol")
	}
	waitFor(t, "audit -f to print carol's creation", func() bool { return strings.Count(follow.stdout.String(), "identity.created") == 2 })

	rows := exportAudit(t, s, "--since", "1h")
	prev := ""
	for i, e := range rows {
		c, err := e.Canonical()
		if err != nil || api.ChainDigest(e.Prev, c) != e.Digest || (i > 0 && e.Prev != prev) || e.Seq != int64(i+1) {
			t.Fatalf("export line %d does not recompute or does not follow: %+v", i+1, e)
		}
		prev = e.Digest
	}

	cp, errOut, code := s.sema(t, nil, "audit", "checkpoint")
	if code != 0 || !checkpointLines.MatchString(cp) {
		t.Fatalf("audit checkpoint: exit %d %q %s", code, cp, errOut)
	}
	out, errOut, code = s.sema(t, nil, "audit", "verify")
	if code != 0 || !regexp.MustCompile(`^verified [0-9]+ rows? of the audit trail up to audit:[0-9]+:[0-9a-f]{64}\nverified [0-9]+ rows? of the instruction history up to history:[0-9]+:[0-9a-f]{64}\n$`).MatchString(out) {
		t.Fatalf("audit verify: exit %d %q %s", code, out, errOut)
	}
	if out, errOut, code := s.sema(t, nil, "audit", "verify", "--from", strings.Fields(cp)[0]); code != 0 || !strings.HasPrefix(out, "verified ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("audit verify --from: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "audit", "verify", "--from", "yesterday"); code != cli.ExitUsage {
		t.Fatalf("audit verify --from yesterday: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "audit", "export", "--since", "yesterday"); code != cli.ExitUsage || !strings.Contains(errOut, "--since") {
		t.Fatalf("audit export --since yesterday: exit %d %s", code, errOut)
	}
}

// An audit row edited, deleted or moved by SQL on the SQLite registry
// fails `sema audit verify`, which names the row; undone, it verifies
// again.
func TestAnAuditRowChangedBySQLFailsVerifyNamingIt(t *testing.T) {
	s := startServer(t, t.TempDir())
	for _, name := range []string{"bob", "carol", "dave", "erin"} {
		if _, _, code := s.sema(t, nil, "identity", "create", name); code != 0 {
			t.Fatalf("identity create %s", name)
		}
	}
	waitFor(t, "four identity.created rows", func() bool { return len(exportAudit(t, s, "--event", "identity.created")) == 4 })
	rows := exportAudit(t, s)
	if len(rows) < 5 {
		t.Fatalf("%d rows", len(rows))
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.data, sqlite.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	row := rows[2]
	restore := fmt.Sprintf(`INSERT INTO audit (at_ms, identity_id, device_id, event, reason, remote_addr, count, seq, prev_digest, digest)
		SELECT at_ms, identity_id, device_id, event, reason, remote_addr, count, seq, prev_digest, digest FROM gone`)
	for _, tt := range []struct {
		name         string
		tamper, undo []string
		because      string
	}{
		{"edited", []string{fmt.Sprintf(`UPDATE audit SET event = 'identity.disabled' WHERE seq = %d`, row.Seq)},
			[]string{fmt.Sprintf(`UPDATE audit SET event = '%s' WHERE seq = %d`, row.Event, row.Seq)}, "edited"},
		{"deleted", []string{`CREATE TABLE gone AS SELECT * FROM audit WHERE seq = ` + fmt.Sprint(row.Seq), fmt.Sprintf(`DELETE FROM audit WHERE seq = %d`, row.Seq)},
			[]string{restore, `DROP TABLE gone`}, "removed"},
		{"moved", []string{
			fmt.Sprintf(`UPDATE audit SET seq = -1 WHERE seq = %d`, row.Seq), fmt.Sprintf(`UPDATE audit SET seq = %d WHERE seq = %d`, row.Seq, row.Seq+1), fmt.Sprintf(`UPDATE audit SET seq = %d WHERE seq = -1`, row.Seq+1),
		}, []string{
			fmt.Sprintf(`UPDATE audit SET seq = -1 WHERE seq = %d`, row.Seq), fmt.Sprintf(`UPDATE audit SET seq = %d WHERE seq = %d`, row.Seq, row.Seq+1), fmt.Sprintf(`UPDATE audit SET seq = %d WHERE seq = -1`, row.Seq+1),
		}, "moved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, q := range tt.tamper {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			out, errOut, code := s.sema(t, nil, "audit", "verify")
			want := fmt.Sprintf("row seq %d: ", row.Seq)
			if code != cli.ExitFailure || !strings.Contains(errOut, want) || !strings.Contains(errOut, tt.because) {
				t.Fatalf("verify after the row was %s: exit %d %q %s; want exit 1 naming %q", tt.name, code, out, errOut, want)
			}
			for _, q := range tt.undo {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if out, errOut, code := s.sema(t, nil, "audit", "verify"); code != 0 {
				t.Fatalf("verify once undone: exit %d %q %s", code, out, errOut)
			}
		})
	}
}

// An instruction history row edited by SQL on the SQLite registry fails
// `sema audit verify`, which names the history's row.
func TestAHistoryRowChangedBySQLFailsVerifyNamingIt(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, deviceID := enroll(t, s, t.TempDir()) // never served: its instructions settle at once, never started
	for range 3 {
		s.sema(t, nil, "run", "--device", deviceID, "--", "make deploy")
	}
	waitFor(t, "three history rows", func() bool {
		out, _, _ := s.sema(t, nil, "history", "--json")
		return strings.Count(out, `"instructionId"`) == 3
	})
	// The rows recompute from their JSON fields alone (docs/audit.md).
	out, _, _ := s.sema(t, nil, "history", "--json")
	prev := api.ChainGenesis
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r api.InstructionRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.PrevDigest != prev || api.ChainDigest(prev, api.HistoryCanonical(r.Seq, wireMs(t, r.At), historyFields(t, r))) != r.Digest {
			t.Fatalf("history row %d does not recompute or does not follow: %s", i+1, line)
		}
		prev = r.Digest
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.data, sqlite.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `UPDATE history SET summary = 'make test' WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := s.sema(t, nil, "audit", "verify")
	if code != cli.ExitFailure || !strings.Contains(errOut, "the instruction history does not verify: row seq 2: ") {
		t.Fatalf("verify after a history row was edited: exit %d %q %s", code, out, errOut)
	}
}

// wireMs is a wire time in Unix milliseconds.
func wireMs(t *testing.T, s string) int64 {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("a wire time %q: %v", s, err)
	}
	return at.UnixMilli()
}

// historyFields are the chained fields of a history row as the API gives it.
func historyFields(t *testing.T, r api.InstructionRecord) api.InstructionRecordFields {
	t.Helper()
	f := api.InstructionRecordFields{
		InstructionID: r.InstructionID, IdentityID: r.IdentityID, APIKeyID: r.APIKeyID, DeviceID: r.DeviceID,
		RootSessionID: r.RootSessionID, Replica: r.Replica, RemoteAddr: r.RemoteAddr, Kind: r.Kind, Summary: r.Summary,
		Outcome: r.Outcome, ReceivedMs: wireMs(t, r.ReceivedAt), SettledMs: wireMs(t, r.SettledAt),
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes, DataBytes: r.DataBytes,
		TruncatedStdout: r.TruncatedStdout, TruncatedStderr: r.TruncatedStderr,
	}
	if r.DispatchedAt != "" {
		ms := wireMs(t, r.DispatchedAt)
		f.DispatchedMs = &ms
	}
	if r.ExitCode != nil {
		code := int64(*r.ExitCode)
		f.ExitCode = &code
	}
	return f
}
