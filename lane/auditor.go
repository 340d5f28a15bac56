package lane

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

// auditor writes the audit trail from one goroutine, so that neither a
// request nor a device's frame path ever waits on the database. Rows queue
// in memory and are written in batches, many rows to a transaction, so a
// burst of connects is written as fast as it comes; identical refusals
// from one address are merged into one row with a count (refusalWindows);
// rows older than the retention are pruned, at start and every
// auditPruneEvery, by the database clock.
//
// The queue is bounded (auditQueueRows, about 10 MB): rows beyond it, and
// rows a failed write lost, are dropped, and the drop is itself an audit
// row (audit.rows_dropped, reason queue_full or write_failed, count the
// rows) and a metric (sema_lane_audit_rows_dropped_total).
type auditor struct {
	cfg          auditorConfig
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

// auditorConfig is what the auditor needs from the Server's Config.
type auditorConfig struct {
	store     store.Store
	log       *slog.Logger
	clock     clock.Clock
	retention time.Duration
	keep      []string // events never pruned
	maxQueued int      // 0 means auditQueueRows
}

const (
	auditQueueRows    = 1 << 16 // rows waiting to be written, at most
	auditBatchRows    = 1000    // rows in one transaction, at most
	auditWindow       = 10 * time.Second
	auditWindowsOpen  = 4096 // kinds of refusal merged at once, at most
	auditPruneEvery   = time.Hour
	auditWriteTimeout = 30 * time.Second

	dropQueueFull   = "queue_full"
	dropWriteFailed = "write_failed"
)

func startAuditor(cfg auditorConfig) *auditor {
	if cfg.maxQueued == 0 {
		cfg.maxQueued = auditQueueRows
	}
	a := &auditor{
		cfg:     cfg,
		windows: newRefusalWindows(auditWindow, auditWindowsOpen),
		dropped: map[string]int{},
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go a.run()
	return a
}

// add queues a row; it never blocks.
func (a *auditor) add(e store.AuditEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, refusal := refusals[EventName(e.Event)]
	switch {
	case a.closed:
		a.droppedTotal.Add(1)
		if !a.lateLogged {
			a.lateLogged = true
			a.cfg.log.Warn("audit rows after the auditor stopped are not written; counted in sema_lane_audit_rows_dropped_total", "event", e.Event)
		}
		return
	case refusal && a.windows.add(e, a.cfg.clock.Now()):
	case len(a.queue) >= a.cfg.maxQueued:
		a.drop(1, dropQueueFull)
		return
	default:
		a.queue = append(a.queue, e)
	}
	a.signal()
}

// signal wakes the writer; one pending signal is enough.
func (a *auditor) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// drop counts n lost rows (a.mu held); the next batch carries the drop row.
func (a *auditor) drop(n int, reason string) {
	if a.dropped[reason] == 0 {
		a.cfg.log.Warn("audit rows dropped; an audit.rows_dropped row will count them", "reason", reason)
	}
	a.dropped[reason] += n
	a.droppedTotal.Add(uint64(n))
}

func (a *auditor) run() {
	defer close(a.done)
	a.prune()
	prune := a.cfg.clock.NewTimer(auditPruneEvery)
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
			wait := next.Sub(a.cfg.clock.Now())
			if wait <= 0 {
				window = nil
				continue // it closed while the last batch was written
			}
			window, windowAt = a.cfg.clock.NewTimer(wait), next
			if !a.cfg.clock.Now().Before(next) {
				// The clock passed next between reading it and arming
				// the timer, which then waits a full wait past it.
				window.Stop()
				window = nil
				continue
			}
		}
		select {
		case <-a.wake:
		case <-timerC(window):
			window = nil
		case <-prune.C():
			a.prune()
			prune = a.cfg.clock.NewTimer(auditPruneEvery)
		case <-a.stop:
			a.writeQueued(true)
			return
		}
	}
}

func timerC(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

// writeQueued writes what is queued, the windows that have closed (all of
// them when final) and the drop rows, then releases the flushes waiting on
// them. It returns when the next open window closes (zero if none).
func (a *auditor) writeQueued(final bool) time.Time {
	a.mu.Lock()
	if final {
		a.closed = true
		a.queue = append(a.queue, a.windows.all()...)
	} else {
		a.queue = append(a.queue, a.windows.closed(a.cfg.clock.Now())...)
	}
	for _, reason := range slices.Sorted(maps.Keys(a.dropped)) {
		a.queue = append(a.queue, store.AuditEvent{Event: string(EventAuditDropped), Reason: reason, Count: a.dropped[reason]})
	}
	clear(a.dropped)
	rows, flushes := a.queue, a.flushes
	a.queue, a.flushes = nil, nil
	next, _ := a.windows.next()
	a.mu.Unlock()

	for len(rows) > 0 {
		batch := rows[:min(len(rows), auditBatchRows)]
		rows = rows[len(batch):]
		a.writeBatch(batch)
	}
	for _, f := range flushes {
		close(f)
	}
	return next
}

func (a *auditor) writeBatch(batch []store.AuditEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), auditWriteTimeout)
	defer cancel()
	err := a.cfg.store.Audit(ctx, batch...)
	if err == nil {
		return
	}
	a.cfg.log.Error("audit write failed", "rows", len(batch), "err", err)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range batch {
		if e.Event == string(EventAuditDropped) {
			a.dropped[e.Reason] += e.Count // still to be told; counted already
		} else {
			a.drop(1, dropWriteFailed)
		}
	}
}

// prune deletes the rows older than the retention, by the database clock.
func (a *auditor) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), auditWriteTimeout)
	defer cancel()
	n, err := a.cfg.store.PruneAudit(ctx, a.cfg.retention, a.cfg.keep)
	switch {
	case err != nil:
		a.cfg.log.Error("pruning the audit trail failed", "err", err)
	case n > 0:
		a.cfg.log.Info("pruned the audit trail", "rows", n, "retention", a.cfg.retention)
	}
}

// flush writes every row added before it, held refusals included (their
// windows close early), and returns once they are written.
func (a *auditor) flush() {
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

// close writes what is queued and held, and stops.
func (a *auditor) close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
