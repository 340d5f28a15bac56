package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// The audit trail's hash chain (docs/audit.md, "The chain").

func verify(t *testing.T, s store.Store, from *store.ChainHead) store.ChainReport {
	t.Helper()
	rep, err := s.VerifyChain(ctx(t), api.ChainAudit, from)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func appendAudit(t *testing.T, s store.Store, n int, event string) {
	t.Helper()
	rows := make([]store.AuditEvent, n)
	for i := range rows {
		rows[i] = store.AuditEvent{IdentityID: "idn_A", DeviceID: fmt.Sprintf("dev_%d", i), Event: event, Reason: "r", RemoteAddr: "192.0.2.1", Count: i % 3}
	}
	if err := s.Audit(ctx(t), rows...); err != nil {
		t.Fatal(err)
	}
}

func exec(t *testing.T, s Backend, query string) {
	t.Helper()
	if _, err := s.DB().ExecContext(ctx(t), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// reseal recomputes every chained row's prev and digest and the head, as
// a forger with the database (or a test that edits rows on purpose) would.
func reseal(t *testing.T, s Backend) {
	t.Helper()
	rows, err := s.AuditEvents(ctx(t), store.AuditFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	prev := api.ChainGenesis
	for _, r := range rows {
		if r.Seq == 0 {
			continue
		}
		d := api.ChainDigest(prev, api.AuditCanonical(r.Seq, r.At.UnixMilli(), r.IdentityID, r.DeviceID, r.Event, r.Reason, r.RemoteAddr, r.Count))
		exec(t, s, fmt.Sprintf(`UPDATE audit SET prev_digest = '%s', digest = '%s' WHERE seq = %d`, prev, d, r.Seq))
		prev = d
	}
	exec(t, s, fmt.Sprintf(`UPDATE chain_heads SET digest = '%s' WHERE chain = 'audit'`, prev))
}

// Every row is chained: seq 1, 2, …, each prev the digest before it, each
// digest recomputable from the row as read; the head is the last row.
func testTheAuditTrailIsOneChain(t *testing.T, s Backend) {
	if rep := verify(t, s, nil); rep.Problem != nil || rep.Rows != 0 || rep.Head.Seq != 0 || rep.Head.Digest != api.ChainGenesis {
		t.Fatalf("an empty chain: %+v", rep)
	}
	appendAudit(t, s, 3, "device.connected")
	appendAudit(t, s, 600, "device.disconnected") // more than one INSERT
	rows, err := s.AuditEvents(ctx(t), store.AuditFilter{Limit: 1000})
	if err != nil || len(rows) != 603 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	prev := api.ChainGenesis
	for i, r := range rows {
		want := api.ChainDigest(prev, api.AuditCanonical(int64(i+1), r.At.UnixMilli(), r.IdentityID, r.DeviceID, r.Event, r.Reason, r.RemoteAddr, r.Count))
		if r.Seq != int64(i+1) || r.Prev != prev || r.Digest != want {
			t.Fatalf("row %d: seq %d prev %s digest %s; want seq %d prev %s digest %s", i, r.Seq, r.Prev, r.Digest, i+1, prev, want)
		}
		prev = r.Digest
	}
	head, err := s.ChainHead(ctx(t), api.ChainAudit)
	if err != nil || head.Seq != 603 || head.Digest != prev || !head.At.Equal(rows[602].At) {
		t.Fatalf("ChainHead = %+v, %v; want seq 603, the last digest and time", head, err)
	}
	rep := verify(t, s, nil)
	if rep.Problem != nil || rep.Rows != 603 || rep.Head.Seq != 603 || rep.From.Seq != 0 {
		t.Fatalf("VerifyChain = %+v", rep)
	}
	if _, err := s.ChainHead(ctx(t), "nope"); err != store.ErrNotFound {
		t.Fatalf("an unknown chain: %v", err)
	}
}

// Tampering with the rows by SQL is found, and the first row that does not
// match is named: an edit, a deletion in the middle or at the end, a row
// added, rows swapped (their content, or their seq).
func testTamperingWithTheChainIsNamed(t *testing.T, s Backend) {
	appendAudit(t, s, 10, "device.connected")
	for _, tt := range []struct {
		name    string
		tamper  []string
		undo    []string
		seq     int64
		because string
	}{
		{"edited", []string{`UPDATE audit SET reason = 'other' WHERE seq = 4`}, []string{`UPDATE audit SET reason = 'r' WHERE seq = 4`}, 4, "edited"},
		{"count edited", []string{`UPDATE audit SET count = 7 WHERE seq = 9`}, nil, 9, "edited"},
		{"time edited", []string{`UPDATE audit SET at_ms = at_ms + 1 WHERE seq = 2`}, nil, 2, "edited"},
		{"deleted", []string{`DELETE FROM audit WHERE seq = 5`}, nil, 5, "removed"},
		{"deleted at the end", []string{`DELETE FROM audit WHERE seq = 10`}, nil, 10, "removed from its end"},
		{"content swapped", []string{
			`UPDATE audit SET device_id = 'dev_6' WHERE seq = 6`, `UPDATE audit SET device_id = 'dev_5' WHERE seq = 7`,
		}, nil, 6, "edited"},
		{"seq swapped", []string{
			`UPDATE audit SET seq = -3 WHERE seq = 3`, `UPDATE audit SET seq = 3 WHERE seq = 8`, `UPDATE audit SET seq = 8 WHERE seq = -3`,
		}, nil, 3, "moved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := s.DB().BeginTx(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for _, q := range tt.tamper {
				if _, err := tx.ExecContext(ctx(t), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			rep := verify(t, s, nil)
			if rep.Problem == nil || rep.Problem.Seq != tt.seq || !strings.Contains(rep.Problem.Why, tt.because) {
				t.Fatalf("VerifyChain = %+v (problem %+v); want seq %d named, %q", rep, rep.Problem, tt.seq, tt.because)
			}
			// Start again from a whole chain.
			exec(t, s, `DELETE FROM audit`)
			exec(t, s, `DELETE FROM chain_heads`)
			appendAudit(t, s, 10, "device.connected")
		})
	}
}

// A checkpoint (a head kept elsewhere) catches what the chain alone cannot:
// a forger who rewrites a row and seals every digest after it again.
func testACheckpointCatchesARewrittenChain(t *testing.T, s Backend) {
	appendAudit(t, s, 5, "device.connected")
	cp, err := s.ChainHead(ctx(t), api.ChainAudit)
	if err != nil {
		t.Fatal(err)
	}
	appendAudit(t, s, 4, "device.disconnected")
	if rep := verify(t, s, &cp); rep.Problem != nil || rep.Rows != 4 || rep.From.Seq != 5 {
		t.Fatalf("from the checkpoint: %+v", rep)
	}
	beyond := store.ChainHead{Chain: api.ChainAudit, Seq: 12, Digest: cp.Digest}
	if rep := verify(t, s, &beyond); rep.Problem == nil || !strings.Contains(rep.Problem.Why, "removed from its end") {
		t.Fatalf("a checkpoint past the head: %+v", rep)
	}
	exec(t, s, `UPDATE audit SET reason = 'forged' WHERE seq = 2`)
	reseal(t, s)
	if rep := verify(t, s, nil); rep.Problem != nil {
		t.Fatalf("the resealed chain is whole by itself: %+v", rep.Problem)
	}
	if rep := verify(t, s, &cp); rep.Problem == nil || rep.Problem.Seq != 5 || !strings.Contains(rep.Problem.Why, "rewritten") {
		t.Fatalf("from the checkpoint of the original chain: %+v", rep)
	}
	other := store.ChainHead{Chain: "history", Seq: 1, Digest: cp.Digest}
	if rep := verify(t, s, &other); rep.Problem == nil {
		t.Fatal("another chain's checkpoint was accepted")
	}
}

// Pruning records an anchor: the chain verifies from the oldest row kept,
// a checkpoint older than it is refused by name, and appending goes on.
func testPruningKeepsTheChainVerifiable(t *testing.T, s Backend) {
	appendAudit(t, s, 4, "old")
	cp, _ := s.ChainHead(ctx(t), api.ChainAudit)
	appendAudit(t, s, 3, "recent")
	exec(t, s, fmt.Sprintf(`UPDATE audit SET at_ms = at_ms - %d WHERE event = 'old'`, (2*time.Hour).Milliseconds()))
	reseal(t, s)
	if n, err := s.PruneAudit(ctx(t), time.Hour, nil); err != nil || n != 4 {
		t.Fatalf("PruneAudit = %d, %v", n, err)
	}
	rep := verify(t, s, nil)
	if rep.Problem != nil || rep.From.Seq != 4 || rep.Rows != 3 {
		t.Fatalf("after pruning: %+v", rep)
	}
	head, _ := s.ChainHead(ctx(t), api.ChainAudit)
	if rep := verify(t, s, &head); rep.Problem != nil || rep.Rows != 0 {
		t.Fatalf("from the head: %+v", rep)
	}
	fromAnchor := rep.From
	if rep := verify(t, s, &fromAnchor); rep.Problem != nil || rep.Rows != 3 {
		t.Fatalf("from the anchor: %+v", rep)
	}
	old := store.ChainHead{Chain: api.ChainAudit, Seq: 2, Digest: cp.Digest}
	if rep := verify(t, s, &old); rep.Problem == nil || !strings.Contains(rep.Problem.Why, "pruned") {
		t.Fatalf("a checkpoint before the anchor: %+v", rep)
	}
	exec(t, s, `DELETE FROM audit WHERE seq = 5`)
	if rep := verify(t, s, nil); rep.Problem == nil || rep.Problem.Seq != 5 {
		t.Fatalf("the oldest kept row deleted: %+v", rep)
	}
}

// ChainAcrossReplicas is the chain with several writers at once: stores
// are Store values on one database (as replicas are), each appending from
// many goroutines. The result is one chain: no fork, no lost row.
func ChainAcrossReplicas(t *testing.T, stores []store.Store, perWriter, batches int) {
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*batches)
	for w, s := range stores {
		for b := range batches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rows := make([]store.AuditEvent, perWriter)
				for i := range rows {
					rows[i] = store.AuditEvent{Event: "device.connected", DeviceID: fmt.Sprintf("dev_%d_%d_%d", w, b, i)}
				}
				errs <- s.Audit(t.Context(), rows...)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := int64(len(stores) * batches * perWriter)
	for _, s := range stores {
		rep := verify(t, s, nil)
		if rep.Problem != nil || rep.Rows != want || rep.Head.Seq != want {
			t.Fatalf("after %d rows from %d writers: %+v (problem %+v)", want, len(stores), rep, rep.Problem)
		}
	}
}
