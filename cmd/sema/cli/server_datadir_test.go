package cli_test

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// A second `sema server` on a data dir exits 1 at once, naming the
// server that holds it, whatever the registry; it never listens.
func TestASecondServerOnOneDataDirExits1NamingTheFirst(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	want := fmt.Sprintf("another sema server (pid %d) is using %s", first.cmd.Process.Pid, data)
	for _, flags := range [][]string{
		nil,
		// The data dir holds admin.key with PostgreSQL too: refused before
		// the database is dialled (nothing listens on port 1).
		{"--postgres", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"},
	} {
		second := startProc(t, nil, nil, append([]string{"server", "--listen", "127.0.0.1:0", "--data", data}, flags...)...)
		if code := second.wait(t); code != 1 {
			t.Fatalf("second server %v: exit %d, want 1\n%s", flags, code, second.stderr)
		}
		if got := second.stderr.String(); !strings.Contains(got, want) || listeningURL.MatchString(got) {
			t.Fatalf("second server %v said:\n%s\nwant %q and no listening", flags, got, want)
		}
	}
	first.devices(t) // the first still answers
}

// The kernel releases the lock when its holder dies, however it dies: a
// server started after a SIGKILL runs.
func TestTheDataDirLockDiesWithItsServer(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	again := startServer(t, data)
	again.cmd.Process.Signal(syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Fatalf("restart after SIGKILL: exit %d\n%s", code, again.stderr)
	}
}

// --audit-retention prunes old rows, but never the record of the
// first start: a restart after the retention prints no second admin key.
func TestAuditRetentionKeepsTheFirstStartsRecord(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	first.cmd.Process.Signal(syscall.SIGTERM)
	if code := first.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	st, err := sqlite.Open(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Audit(t.Context(), store.AuditEvent{Event: "test.old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(t.Context(), `UPDATE audit SET at_ms = at_ms - ?`, (48 * time.Hour).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	again := startProc(t, nil, nil, "server", "--listen", "127.0.0.1:0", "--data", data, "--audit-retention", "24h")
	waitFor(t, "the old row pruned and the server listening", func() bool {
		// The log reaches the test through a pipe: wait for it too, not
		// only for the database.
		rows, err := st.AuditEvents(t.Context(), store.AuditFilter{Event: "test.old"})
		return err == nil && len(rows) == 0 && listeningURL.MatchString(again.stderr.String())
	})
	if strings.Contains(again.stdout.String(), "sema_") || !strings.Contains(again.stderr.String(), "admin identity exists") {
		t.Fatalf("the restart after the retention:\n%s\n%s", again.stdout, again.stderr)
	}
	if rows, _ := st.AuditEvents(t.Context(), store.AuditFilter{Event: "server.admin_created"}); len(rows) != 1 {
		t.Fatalf("%d first-start records, want 1", len(rows))
	}
	again.cmd.Process.Signal(syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	bad := startProc(t, nil, nil, "server", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--audit-retention", "0s")
	if code := bad.wait(t); code != 2 || !strings.Contains(bad.stderr.String(), "--audit-retention") {
		t.Fatalf("--audit-retention 0s: exit %d, %s; want 2 naming the flag", code, bad.stderr)
	}
}

// --history-retention prunes the instruction history by the database
// clock (a row's age is the chain's time, when it was written), at start; the history flags are checked before the server starts.
func TestHistoryRetentionPrunesAndItsFlagsAreChecked(t *testing.T) {
	data := t.TempDir()
	st, err := sqlite.Open(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	row := func(id string, settled time.Time) store.HistoryRow {
		return store.HistoryRow{InstructionID: id, DeviceID: "dev_A", Kind: "exec", Summary: "true", ReceivedAt: settled, SettledAt: settled, Outcome: "ok"}
	}
	if err := st.RecordHistory(t.Context(), row("ins_old", now.Add(-48*time.Hour)), row("ins_recent", now.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	// Rows age by the chain's time, when they were written (docs/audit.md).
	if _, err := st.DB().ExecContext(t.Context(), `UPDATE history SET at_ms = at_ms - ? WHERE instruction_id = 'ins_old'`, (48 * time.Hour).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, data, "--history-retention", "24h")
	waitFor(t, "the old row pruned", func() bool {
		_, err := st.HistoryRow(t.Context(), "ins_old")
		return errors.Is(err, store.ErrNotFound)
	})
	if _, err := st.HistoryRow(t.Context(), "ins_recent"); err != nil {
		t.Fatalf("the recent row: %v", err)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait(t)
	for _, bad := range [][]string{{"--history-retention", "0s"}, {"--history-commands", "hash"}} {
		p := startProc(t, nil, nil, append([]string{"server", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, bad...)...)
		if code := p.wait(t); code != 2 || !strings.Contains(p.stderr.String(), bad[0]) {
			t.Errorf("%v: exit %d, %s; want 2 naming the flag", bad, code, p.stderr)
		}
	}
}
