package lane

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlstore"
	"github.com/sema-agent/sema/protocol"
)

// historyGate holds the historian's first write until the test opens the
// gate, and fails the writes it is told to fail.
type historyGate struct {
	store.Store
	entered chan struct{} // closed when the first write begins
	gate    chan struct{} // the test closes it to let writes through
	first   bool
	failing atomic.Int32 // writes still to fail
	writes  atomic.Int32
}

// RecordHistory is called from the historian's goroutine only.
func (g *historyGate) RecordHistory(ctx context.Context, rows ...store.HistoryRow) error {
	g.writes.Add(1)
	if !g.first {
		g.first = true
		close(g.entered)
	}
	<-g.gate
	if g.failing.Add(-1) >= 0 {
		return errors.New("the registry refused the write")
	}
	return g.Store.RecordHistory(ctx, rows...)
}

func newHistoryGate(st store.Store) *historyGate {
	return &historyGate{Store: st, entered: make(chan struct{}), gate: make(chan struct{})}
}

func testHistorian(t *testing.T, st store.Store) (*historian, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(laneStart)
	h := startHistorian(historianConfig{store: st, log: quietLogger(), clock: clk, retention: DefaultConfig().HistoryRetention})
	t.Cleanup(h.close)
	return h, clk
}

// gathered lets the writer's gathering of a first row end, by the lane's
// clock, so that it writes.
func gathered(t *testing.T, clk *clock.Fake) {
	t.Helper()
	if _, ok := clk.WaitTimer(t.Context(), func(d time.Duration) bool { return d == historyGather }); !ok {
		t.Fatal("the writer did not gather the first row")
	}
	clk.Advance(historyGather)
}

func settledRow(i int) store.HistoryRow {
	return store.HistoryRow{InstructionID: fmt.Sprintf("ins_%06d", i), DeviceID: "dev_A", Kind: "exec", Summary: "true",
		ReceivedAt: laneStart, SettledAt: laneStart.Add(time.Second), Outcome: "ok"}
}

func historyCount(t *testing.T, st *sqlstore.Store) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM history").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// No row is lost under load: 12,000 rows queued behind a stalled write are
// all written, in batches, in the order they settled.
func TestTheHistoryLosesNoRowOf12000QueuedBehindAStalledWrite(t *testing.T) {
	st := openRegistry(t)
	gated := newHistoryGate(st)
	h, clk := testHistorian(t, gated)
	h.add(settledRow(0))
	gathered(t, clk)
	<-gated.entered // the writer holds row 0; the rest queue behind it
	const n = 12000
	for i := 1; i <= n; i++ {
		h.add(settledRow(i))
	}
	close(gated.gate)
	h.flush()
	if got := historyCount(t, st); got != n+1 || h.droppedTotal.Load() != 0 {
		t.Fatalf("%d of %d rows written, %d dropped", got, n+1, h.droppedTotal.Load())
	}
	if w := gated.writes.Load(); w > n/historyBatchRows+2 {
		t.Fatalf("%d writes for %d rows: not batched", w, n+1)
	}
	rows, err := st.History(t.Context(), store.HistoryFilter{After: n - 1})
	if err != nil || len(rows) != 2 || rows[1].InstructionID != settledRow(n).InstructionID {
		t.Fatalf("the last rows %+v, %v: not in the order they were added", rows, err)
	}
}

// A failed write loses nothing: its rows are written again after
// historyRetryEvery, by the lane's clock.
func TestAFailedHistoryWriteIsRetriedNotLost(t *testing.T) {
	st := openRegistry(t)
	gated := newHistoryGate(st)
	gated.failing.Store(2)
	close(gated.gate)
	h, clk := testHistorian(t, gated)
	for i := range 5 {
		h.add(settledRow(i))
	}
	gathered(t, clk)
	for range 2 {
		if _, ok := clk.WaitTimer(t.Context(), func(d time.Duration) bool { return d == historyRetryEvery }); !ok {
			t.Fatal("no retry was armed after a failed write")
		}
		clk.Advance(historyRetryEvery)
	}
	h.flush()
	if got := historyCount(t, st); got != 5 || h.droppedTotal.Load() != 0 {
		t.Fatalf("%d of 5 rows written after two failed writes, %d dropped", got, h.droppedTotal.Load())
	}
}

// Rows gather for historyGather, by the lane's clock, and are written in
// one transaction; a flush writes at once.
func TestHistoryRowsGatherIntoOneWrite(t *testing.T) {
	st := openRegistry(t)
	gated := newHistoryGate(st)
	close(gated.gate)
	h, clk := testHistorian(t, gated)
	for i := range 50 {
		h.add(settledRow(i))
	}
	gathered(t, clk)
	h.flush()
	if got, writes := historyCount(t, st), gated.writes.Load(); got != 50 || writes != 1 {
		t.Fatalf("%d rows in %d writes; want 50 in 1", got, writes)
	}
	h.add(settledRow(50))
	h.flush() // no clock moves: the flush writes
	if got := historyCount(t, st); got != 51 {
		t.Fatalf("%d rows after a flush, want 51", got)
	}
}

// Shutdown writes what is queued: the history's last rows are not lost.
func TestShutdownWritesTheQueuedHistory(t *testing.T) {
	st := openRegistry(t)
	gated := newHistoryGate(st)
	h, clk := testHistorian(t, gated)
	h.add(settledRow(0))
	gathered(t, clk)
	<-gated.entered
	for i := 1; i <= 100; i++ {
		h.add(settledRow(i))
	}
	close(gated.gate)
	h.close()
	if got := historyCount(t, st); got != 101 {
		t.Fatalf("%d of 101 rows written by close", got)
	}
}

// Exactly one history row for each settled instruction, settled committed
// or never started, with who, what, when and how it ended, and never the
// output itself.
func TestEachSettledInstructionHasExactlyOneHistoryRow(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	never := l.dispatch(fd, execInstr("echo never"))
	settled(t, never)
	fd.establish()
	call, err := l.srv.DispatchFor(t.Context(), fd.id, Requester{IdentityID: l.owner.ID, APIKeyID: "key_x", RemoteAddr: "192.0.2.9", ReceivedAt: laneStart.Add(-time.Second)},
		Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "echo secret-output"}, Timeout: 10 * time.Second, RootSessionID: "ses_1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fd.instructionFor(call.ID)
	fd.chunk(call.ID, 0, protocol.ChunkStdout, "secret-output\n")
	fd.expectChunkAck(call.ID, 0)
	fd.chunk(call.ID, 1, protocol.ChunkStderr, "e")
	fd.expectChunkAck(call.ID, 1)
	fd.exit(call.ID, 2, 3)
	fd.expectChunkAck(call.ID, 2)
	fd.result(call.ID, 0, protocol.ExecOutcome{ExitCode: 3, Truncated: &protocol.Truncated{Stdout: true}})
	fd.expectResultAck(call.ID)
	settled(t, call)
	l.srv.history.flush()

	rows, err := l.store.History(t.Context(), store.HistoryFilter{})
	if err != nil || len(rows) != 2 {
		t.Fatalf("History = %+v, %v; want one row for each of 2 instructions", rows, err)
	}
	if r := rows[0]; r.InstructionID != never.ID || r.Outcome != string(protocol.ErrTargetUnavailable) || r.DispatchedAt != nil || r.ExitCode != nil {
		t.Errorf("the never-started row: %+v", r)
	}
	r := rows[1]
	if r.InstructionID != call.ID || r.IdentityID != l.owner.ID || r.APIKeyID != "key_x" || r.RemoteAddr != "192.0.2.9" ||
		r.DeviceID != fd.id || r.RootSessionID != "ses_1" || r.Kind != "exec" || r.Summary != "echo secret-output" ||
		!r.ReceivedAt.Equal(laneStart.Add(-time.Second)) || r.DispatchedAt == nil || !r.SettledAt.Equal(laneStart) ||
		r.Outcome != "ok" || r.ExitCode == nil || *r.ExitCode != 3 || r.StdoutBytes != 14 || r.StderrBytes != 1 ||
		!r.TruncatedStdout || r.TruncatedStderr {
		t.Errorf("the exec row: %+v", r)
	}
	var withOutput int
	l.store.(*sqlstore.Store).DB().QueryRowContext(t.Context(), `SELECT count(*) FROM history WHERE summary LIKE '%secret-output%' AND summary <> 'echo secret-output'`).Scan(&withOutput)
	if withOutput != 0 {
		t.Error("a history row holds the command's output")
	}
}

// --history-commands digest: the row keeps the command's digest, never its
// text.
func TestHistoryCommandsDigestNeverKeepsTheCommand(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.HistoryCommands = HistoryCommandsDigest })
	fd := l.enroll()
	settled(t, l.dispatch(fd, execInstr("curl -H 'token: hunter2'")))
	l.srv.history.flush()
	rows, _ := l.store.History(t.Context(), store.HistoryFilter{})
	want := protocol.Summary(protocol.KindExec, protocol.CommandArgs{Command: "curl -H 'token: hunter2'"}, true)
	if len(rows) != 1 || rows[0].Summary != want {
		t.Fatalf("rows %+v; want one whose summary is %q", rows, want)
	}
}

func TestHistoryCommandsIsFullOrDigest(t *testing.T) {
	if _, err := (Config{Store: openRegistry(t), HistoryCommands: "hash"}).withDefaults(); err == nil {
		t.Fatal("HistoryCommands hash was accepted")
	}
}
