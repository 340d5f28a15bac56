package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
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

// A row reads back as it was written, with its seq and its links in the
// history's hash chain, which verifies; an edit to a row by SQL is named.
func testHistoryRowsReadBackAsWritten(t *testing.T, s Backend) {
	full := historyRow(1, "idn_a", "dev_A")
	bare := store.HistoryRow{InstructionID: "ins_bare", DeviceID: "dev_A", Kind: "readFile", Summary: "/etc/hosts",
		ReceivedAt: full.ReceivedAt, SettledAt: full.SettledAt, Outcome: "target_unavailable"}
	if err := s.RecordHistory(ctx(t), full, bare); err != nil {
		t.Fatal(err)
	}
	prev := api.ChainGenesis
	for i, want := range []store.HistoryRow{full, bare} {
		got, err := s.HistoryRow(ctx(t), want.InstructionID)
		want.Seq, want.At, want.PrevDigest, want.Digest = int64(i+1), got.At, prev, got.Digest
		if err != nil || !reflect.DeepEqual(got, want) || !api.ValidChainDigest(got.Digest) || got.At.IsZero() {
			t.Errorf("HistoryRow(%s) = %+v, %v\nwant %+v", want.InstructionID, got, err, want)
		}
		prev = got.Digest
	}
	if _, err := s.HistoryRow(ctx(t), "ins_none"); err != store.ErrNotFound {
		t.Errorf("an unknown instruction: %v, want ErrNotFound", err)
	}
	if rep, err := s.VerifyChain(ctx(t), api.ChainHistory, nil); err != nil || rep.Problem != nil || rep.Rows != 2 {
		t.Fatalf("the history chain: %+v, %v; want 2 rows verified", rep, err)
	}
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE history SET summary = 'echo harmless' WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.VerifyChain(ctx(t), api.ChainHistory, nil); err != nil || rep.Problem == nil || rep.Problem.Seq != 1 {
		t.Fatalf("an edited history row: %+v, %v; want row seq 1 named", rep, err)
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
	if rep, err := s.VerifyChain(ctx(t), api.ChainHistory, nil); err != nil || rep.Problem != nil || rep.Rows != int64(len(seen)) {
		t.Fatalf("the history chain after concurrent writers: %+v, %v; want one chain of %d rows", rep, err, len(seen))
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

// Pruning goes by the chain's time (when the row was written) against the
// database clock, as a prefix of the chain, which still verifies.
func testPruneHistoryByTheDatabaseClock(t *testing.T, s Backend) {
	old, recent := historyRow(1, "idn_a", "dev_A"), historyRow(2, "idn_a", "dev_A")
	if err := s.RecordHistory(ctx(t), old, recent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE history SET at_ms = at_ms - 7200000 WHERE instruction_id = '`+old.InstructionID+`'`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneHistory(ctx(t), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneHistory = %d, %v; want the old row", n, err)
	}
	if _, err := s.HistoryRow(ctx(t), recent.InstructionID); err != nil {
		t.Fatalf("the recent row: %v", err)
	}
	if rep, err := s.VerifyChain(ctx(t), api.ChainHistory, nil); err != nil || rep.Problem != nil || rep.Rows != 1 {
		t.Fatalf("the chain after pruning: %+v, %v; want the kept row verified", rep, err)
	}
	if _, err := s.PruneHistory(ctx(t), 0); err == nil {
		t.Fatal("a zero retention was accepted")
	}
}
