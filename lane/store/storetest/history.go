package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// historyRow is a row with every field set, times at millisecond grain.
func historyRow(i int, identity, device string) store.HistoryRow {
	received := time.UnixMilli(1_800_000_000_000 + int64(i)*1000).UTC()
	dispatched := received.Add(3 * time.Millisecond)
	code := i % 3
	return store.HistoryRow{
		InstructionID: fmt.Sprintf("ins_%06d", i), IdentityID: identity, APIKeyID: "key_1", DeviceID: device,
		RootSessionID: "ses_1", Replica: "rep_1", RemoteAddr: "192.0.2.7", Kind: "exec", Summary: fmt.Sprintf("echo %d", i),
		ReceivedAt: received, DispatchedAt: &dispatched, SettledAt: received.Add(40 * time.Millisecond),
		Outcome: "ok", ExitCode: &code, StdoutBytes: int64(i), StderrBytes: 2, DataBytes: 0, TruncatedStdout: i%2 == 0,
	}
}

// A row reads back as it was written, with its seq, and the chain's
// columns NULL until a chain fills them.
func testHistoryRowsReadBackAsWritten(t *testing.T, s Backend) {
	full := historyRow(1, "idn_a", "dev_A")
	bare := store.HistoryRow{InstructionID: "ins_bare", DeviceID: "dev_A", Kind: "readFile", Summary: "/etc/hosts",
		ReceivedAt: full.ReceivedAt, SettledAt: full.SettledAt, Outcome: "target_unavailable"}
	if err := s.RecordHistory(ctx(t), full, bare); err != nil {
		t.Fatal(err)
	}
	for i, want := range []store.HistoryRow{full, bare} {
		got, err := s.HistoryRow(ctx(t), want.InstructionID)
		want.Seq = int64(i + 1)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("HistoryRow(%s) = %+v, %v\nwant %+v", want.InstructionID, got, err, want)
		}
	}
	if _, err := s.HistoryRow(ctx(t), "ins_none"); err != store.ErrNotFound {
		t.Errorf("an unknown instruction: %v, want ErrNotFound", err)
	}
	var nulls int
	if err := s.DB().QueryRowContext(ctx(t), `SELECT count(*) FROM history WHERE prev_digest IS NULL AND digest IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
		t.Errorf("%d rows with NULL digests (%v), want 2", nulls, err)
	}
}

// Exactly one row per instruction: a second row for one is skipped.
func testHistoryHasOneRowPerInstruction(t *testing.T, s Backend) {
	first := historyRow(1, "idn_a", "dev_A")
	again := first
	again.Outcome = "outcome_unknown"
	if err := s.RecordHistory(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordHistory(ctx(t), again, historyRow(2, "idn_a", "dev_A")); err != nil {
		t.Fatal(err)
	}
	rows, err := s.History(ctx(t), store.HistoryFilter{})
	if err != nil || len(rows) != 2 || rows[0].Outcome != "ok" || rows[1].InstructionID != "ins_000002" {
		t.Fatalf("History = %+v, %v; want the first row kept and the new one after it", rows, err)
	}
}

// Concurrent writers never share or reorder a seq: every row gets one,
// distinct, and a reader that follows seq sees them all.
func testHistorySeqIsOneOrderAcrossWriters(t *testing.T, s Backend) {
	const writers, batches, perBatch = 4, 10, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				rows := make([]store.HistoryRow, perBatch)
				for i := range rows {
					rows[i] = historyRow(w*10000+b*100+i, "idn_a", "dev_A")
				}
				errs <- s.RecordHistory(ctx(t), rows...)
			}
		}()
	}
	var seen []store.HistoryRow
	var after int64
	for done := false; !done; {
		done = waitGroupDone(&wg)
		for {
			rows, err := s.History(ctx(t), store.HistoryFilter{After: after, Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) == 0 {
				break
			}
			seen = append(seen, rows...)
			after = rows[len(rows)-1].Seq
		}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != writers*batches*perBatch {
		t.Fatalf("a reader following seq saw %d rows, want %d", len(seen), writers*batches*perBatch)
	}
	for i, r := range seen {
		if r.Seq != int64(i+1) {
			t.Fatalf("row %d has seq %d: seq is not one gapless order", i, r.Seq)
		}
	}
}

// waitGroupDone reports whether wg is done, without waiting.
func waitGroupDone(wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Filters select by identity, device, session, outcome and received time,
// and After pages in seq order.
func testHistoryFiltersAndPages(t *testing.T, s Backend) {
	var rows []store.HistoryRow
	for i := range 10 {
		r := historyRow(i, "idn_a", "dev_A")
		if i >= 6 {
			r.IdentityID, r.DeviceID, r.RootSessionID = "idn_b", "dev_B", "ses_2"
		}
		if i == 3 {
			r.Outcome, r.ExitCode = "denied", nil
		}
		rows = append(rows, r)
	}
	if err := s.RecordHistory(ctx(t), rows...); err != nil {
		t.Fatal(err)
	}
	count := func(f store.HistoryFilter) int {
		got, err := s.History(ctx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for _, tt := range []struct {
		name string
		f    store.HistoryFilter
		want int
	}{
		{"all", store.HistoryFilter{}, 10},
		{"identity", store.HistoryFilter{IdentityID: "idn_b"}, 4},
		{"device", store.HistoryFilter{DeviceID: "dev_A"}, 6},
		{"session", store.HistoryFilter{RootSessionID: "ses_2"}, 4},
		{"outcome", store.HistoryFilter{Outcome: "denied"}, 1},
		{"since", store.HistoryFilter{Since: rows[8].ReceivedAt}, 2},
		{"until", store.HistoryFilter{Until: rows[2].ReceivedAt}, 2},
		{"since and until", store.HistoryFilter{Since: rows[2].ReceivedAt, Until: rows[5].ReceivedAt}, 3},
		{"after", store.HistoryFilter{After: 7}, 3},
		{"limit", store.HistoryFilter{Limit: 4}, 4},
		{"identity and after", store.HistoryFilter{IdentityID: "idn_a", After: 4}, 2},
	} {
		if got := count(tt.f); got != tt.want {
			t.Errorf("%s: %d rows, want %d", tt.name, got, tt.want)
		}
	}
}

// 10,000 rows are one call and one transaction.
func testHistoryWrites10000RowsInOneCall(t *testing.T, s Backend) {
	rows := make([]store.HistoryRow, 10000)
	for i := range rows {
		rows[i] = historyRow(i, "idn_a", "dev_A")
	}
	if err := s.RecordHistory(ctx(t), rows...); err != nil {
		t.Fatal(err)
	}
	var n, top int64
	if err := s.DB().QueryRowContext(ctx(t), `SELECT count(*), MAX(seq) FROM history`).Scan(&n, &top); err != nil || n != 10000 || top != 10000 {
		t.Fatalf("%d rows, top seq %d (%v); want 10000 and 10000", n, top, err)
	}
}

// Pruning goes by settled_ms against the database clock.
func testPruneHistoryByTheDatabaseClock(t *testing.T, s Backend) {
	var now int64
	if err := s.DB().QueryRowContext(ctx(t), `SELECT MAX(applied_ms) FROM schema_migrations`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(now).UTC()
	old, recent := historyRow(1, "idn_a", "dev_A"), historyRow(2, "idn_a", "dev_A")
	old.SettledAt, recent.SettledAt = base.Add(-2*time.Hour), base.Add(-30*time.Minute)
	if err := s.RecordHistory(ctx(t), old, recent); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneHistory(ctx(t), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneHistory = %d, %v; want the old row", n, err)
	}
	if _, err := s.HistoryRow(ctx(t), recent.InstructionID); err != nil {
		t.Fatalf("the recent row: %v", err)
	}
	if _, err := s.PruneHistory(ctx(t), 0); err == nil {
		t.Fatal("a zero retention was accepted")
	}
}
