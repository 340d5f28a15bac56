package audit

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
)

// Writer writes the audit trail from one goroutine, so that neither a
// request nor a device's frame path ever waits on the database. Rows queue
// in memory and are written in batches, many rows to a transaction
// (store.Audit, which appends them to the hash chain), so a burst of
// connects is written as fast as it comes; identical refusals from one
// address are merged into one row with a count (refusalWindows); rows older
// than the retention are pruned, at start and every PruneEvery, by the
// database clock.
//
// The queue is bounded (QueueRows, about 10 MB): rows beyond it, and rows a
// failed write lost, are dropped, and the drop is itself an audit row
// (EventRowsDropped, reason ReasonQueueFull or ReasonWriteFailed, count the
// rows) and a metric (Dropped, sema_lane_audit_rows_dropped_total).
type Writer struct {
	cfg          Config
	droppedTotal atomic.Uint64 // rows lost, for /metrics

	mu      sync.Mutex
	queue   []store.AuditEvent
	windows refusalWindows
	dropped map[string]int // reason → rows dropped since the last drop row
	flushes []chan struct{}
	closed  bool
	// lateLogged: a row after close was logged once.
	lateLogged bool

	wake chan struct{} // one pending signal: there is something to write
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Config is what a Writer writes to and how.
type Config struct {
	Store     store.Store
	Logger    *slog.Logger
	Clock     clock.Clock
	Retention time.Duration // rows older than this are pruned
	Keep      []string      // events never pruned
	// Merge reports whether rows of an event are refusals, merged within
	// Window into one row with a count; nil merges none.
	Merge     func(event string) bool
	MaxQueued int // 0 means QueueRows
}

const (
	QueueRows    = 1 << 16          // rows waiting to be written, at most
	Window       = 10 * time.Second // how long identical refusals merge
	PruneEvery   = time.Hour        // how often the retention is applied
	batchRows    = 1000             // rows in one transaction, at most
	windowsOpen  = 4096             // kinds of refusal merged at once, at most
	writeTimeout = 30 * time.Second
)

// EventRowsDropped is the event of the row that counts rows lost; its
// Reason is ReasonQueueFull or ReasonWriteFailed.
const (
	EventRowsDropped  = "audit.rows_dropped"
	ReasonQueueFull   = "queue_full"
	ReasonWriteFailed = "write_failed"
)

// Start starts a Writer; Close stops it.
func Start(cfg Config) *Writer {
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = QueueRows
	}
	if cfg.Merge == nil {
		cfg.Merge = func(string) bool { return false }
	}
	a := &Writer{
		cfg:     cfg,
		windows: newRefusalWindows(Window, windowsOpen),
		dropped: map[string]int{},
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go a.run()
	return a
}

// Add queues a row; it never blocks.
func (a *Writer) Add(e store.AuditEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	refusal := a.cfg.Merge(e.Event)
	switch {
	case a.closed:
		a.droppedTotal.Add(1)
		if !a.lateLogged {
			a.lateLogged = true
			a.cfg.Logger.Warn("audit rows after the auditor stopped are not written; counted in sema_lane_audit_rows_dropped_total", "event", e.Event)
		}
		return
	case refusal && a.windows.add(e, a.cfg.Clock.Now()):
	case len(a.queue) >= a.cfg.MaxQueued:
		a.drop(1, ReasonQueueFull)
		return
	default:
		a.queue = append(a.queue, e)
	}
	a.signal()
}

// signal wakes the writer; one pending signal is enough.
func (a *Writer) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// drop counts n lost rows (a.mu held); the next batch carries the drop row.
func (a *Writer) drop(n int, reason string) {
	if a.dropped[reason] == 0 {
		a.cfg.Logger.Warn("audit rows dropped; an audit.rows_dropped row will count them", "reason", reason)
	}
	a.dropped[reason] += n
	a.droppedTotal.Add(uint64(n))
}

func (a *Writer) run() {
	defer close(a.done)
	a.prune()
	prune := a.cfg.Clock.NewTimer(PruneEvery)
	var window clock.Timer // fires when the first open window closes
	var windowAt time.Time
	defer func() {
		prune.Stop()
		if window != nil {
			window.Stop()
		}
	}()
	for {
		next := a.writeQueued(false)
		if !next.IsZero() && (window == nil || !next.Equal(windowAt)) {
			if window != nil {
				window.Stop()
			}
			wait := next.Sub(a.cfg.Clock.Now())
			if wait <= 0 {
				window = nil
				continue // it closed while the last batch was written
			}
			window, windowAt = a.cfg.Clock.NewTimer(wait), next
			if !a.cfg.Clock.Now().Before(next) {
				// The clock passed next between reading it and arming
				// the timer, which then waits a full wait past it.
				window.Stop()
				window = nil
				continue
			}
		}
		select {
		case <-a.wake:
		case <-clock.C(window):
			window = nil
		case <-prune.C():
			a.prune()
			prune = a.cfg.Clock.NewTimer(PruneEvery)
		case <-a.stop:
			a.writeQueued(true)
			return
		}
	}
}

// writeQueued writes what is queued, the windows that have closed (all of
// them when final) and the drop rows, then releases the flushes waiting on
// them. It returns when the next open window closes (zero if none).
func (a *Writer) writeQueued(final bool) time.Time {
	a.mu.Lock()
	if final {
		a.closed = true
		a.queue = append(a.queue, a.windows.all()...)
	} else {
		a.queue = append(a.queue, a.windows.closed(a.cfg.Clock.Now())...)
	}
	for _, reason := range slices.Sorted(maps.Keys(a.dropped)) {
		a.queue = append(a.queue, store.AuditEvent{Event: EventRowsDropped, Reason: reason, Count: a.dropped[reason]})
	}
	clear(a.dropped)
	rows, flushes := a.queue, a.flushes
	a.queue, a.flushes = nil, nil
	next, _ := a.windows.next()
	a.mu.Unlock()

	for len(rows) > 0 {
		batch := rows[:min(len(rows), batchRows)]
		rows = rows[len(batch):]
		a.writeBatch(batch)
	}
	for _, f := range flushes {
		close(f)
	}
	return next
}

func (a *Writer) writeBatch(batch []store.AuditEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	err := a.cfg.Store.Audit(ctx, batch...)
	if err == nil {
		return
	}
	a.cfg.Logger.Error("audit write failed", "rows", len(batch), "err", err)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range batch {
		if e.Event == EventRowsDropped {
			a.dropped[e.Reason] += e.Count // still to be told; counted already
		} else {
			a.drop(1, ReasonWriteFailed)
		}
	}
}

// prune deletes the rows older than the retention, by the database clock.
func (a *Writer) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	n, err := a.cfg.Store.PruneAudit(ctx, a.cfg.Retention, a.cfg.Keep)
	switch {
	case err != nil:
		a.cfg.Logger.Error("pruning the audit trail failed", "err", err)
	case n > 0:
		a.cfg.Logger.Info("pruned the audit trail", "rows", n, "retention", a.cfg.Retention)
	}
}

// Flush writes every row added before it, held refusals included (their
// windows close early), and returns once they are written.
func (a *Writer) Flush() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.queue = append(a.queue, a.windows.all()...)
	done := make(chan struct{})
	a.flushes = append(a.flushes, done)
	a.signal()
	a.mu.Unlock()
	<-done
}

// Close writes what is queued and held, and stops; rows added after it are
// counted as dropped.
func (a *Writer) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}

// Dropped is how many rows were lost since Start (a full queue, a failed
// write, a row after Close).
func (a *Writer) Dropped() uint64 { return a.droppedTotal.Load() }
