package lane

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
)

// historian writes the instruction history from one goroutine, so that no
// settlement waits on the database: settle queues the row (add, which
// never blocks) and the writer writes what is queued in batches, many rows
// to a transaction (store.RecordHistory): the first row of a batch waits
// historyGather, by the lane's clock, for others to join it, unless a
// batch is full or a flush waits. A write that fails is not lost:
// its rows go back to the head of the queue and are written again after
// historyRetryEvery. Rows older than the retention are pruned at start and
// every historyPruneEvery, by the database clock.
//
// The queue is bounded (historyQueueRows, some hundred MB at most): only
// while the registry refuses writes for that long are rows dropped, each
// counted in sema_lane_history_rows_dropped_total and logged.
type historian struct {
	cfg          historianConfig
	droppedTotal atomic.Uint64

	mu      sync.Mutex
	queue   []store.HistoryRow
	flushes []chan struct{}
	closed  bool

	wake chan struct{} // one pending signal: there is something to write
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// historianConfig is what the historian needs from the Server's Config.
type historianConfig struct {
	store     store.Store
	log       *slog.Logger
	clock     clock.Clock
	retention time.Duration
	maxQueued int // 0 means historyQueueRows
}

const (
	historyQueueRows    = 1 << 18               // rows waiting to be written, at most
	historyBatchRows    = 1000                  // rows in one transaction, at most
	historyGather       = 50 * time.Millisecond // rows gather this long before a write
	historyRetryEvery   = 2 * time.Second
	historyPruneEvery   = time.Hour
	historyWriteTimeout = 30 * time.Second
)

func startHistorian(cfg historianConfig) *historian {
	if cfg.maxQueued == 0 {
		cfg.maxQueued = historyQueueRows
	}
	h := &historian{
		cfg:  cfg,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go h.run()
	return h
}

// add queues a row; it never blocks.
func (h *historian) add(r store.HistoryRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.queue) >= h.cfg.maxQueued {
		if h.droppedTotal.Add(1) == 1 {
			h.cfg.log.Error("instruction history rows dropped; counted in sema_lane_history_rows_dropped_total",
				"instruction_id", r.InstructionID, "stopped", h.closed)
		}
		return
	}
	h.queue = append(h.queue, r)
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *historian) run() {
	defer close(h.done)
	h.prune()
	prune := h.cfg.clock.NewTimer(historyPruneEvery)
	var gather, retry clock.Timer
	defer func() {
		for _, t := range []clock.Timer{prune, gather, retry} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	// write writes what is queued now, or arms the retry when it fails.
	write := func() {
		if gather != nil {
			gather.Stop()
			gather = nil
		}
		if !h.writeQueued() {
			retry = h.cfg.clock.NewTimer(historyRetryEvery)
		}
	}
	for {
		wake := h.wake
		if retry != nil {
			wake = nil // what is queued waits for the retry
		}
		select {
		case <-wake:
			switch due, queued := h.due(); {
			case due:
				write()
			case queued && gather == nil:
				// Let the rows of the next moments join this one's
				// transaction: one commit for many settlements.
				gather = h.cfg.clock.NewTimer(historyGather)
			}
		case <-clock.C(gather):
			gather = nil
			write()
		case <-clock.C(retry):
			retry = nil
			write()
		case <-prune.C():
			h.prune()
			prune = h.cfg.clock.NewTimer(historyPruneEvery)
		case <-h.stop:
			h.mu.Lock()
			h.closed = true
			h.mu.Unlock()
			if !h.writeQueued() {
				h.mu.Lock()
				lost := len(h.queue)
				h.queue = nil
				h.mu.Unlock()
				h.droppedTotal.Add(uint64(lost))
				h.cfg.log.Error("instruction history rows not written at shutdown", "rows", lost)
			}
			h.release()
			return
		}
	}
}

// due reports whether what is queued is to be written at once (a batch is
// full, or a flush waits), and whether anything is queued.
func (h *historian) due() (due, queued bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.flushes) > 0 || len(h.queue) >= historyBatchRows, len(h.queue) > 0
}

// writeQueued writes the queue in batches, oldest first, and releases the
// flushes once it is empty; false when a write failed (the rows not
// written are at the queue's head again).
func (h *historian) writeQueued() bool {
	for {
		h.mu.Lock()
		batch := h.queue[:min(len(h.queue), historyBatchRows)]
		h.mu.Unlock()
		if len(batch) == 0 {
			h.release()
			return true
		}
		if err := h.write(batch); err != nil {
			h.cfg.log.Error("instruction history write failed; retrying", "rows", len(batch), "err", err)
			return false
		}
		h.mu.Lock()
		h.queue = h.queue[len(batch):]
		if len(h.queue) == 0 {
			h.queue = nil // let the written rows go
		}
		h.mu.Unlock()
	}
}

func (h *historian) write(batch []store.HistoryRow) error {
	ctx, cancel := context.WithTimeout(context.Background(), historyWriteTimeout)
	defer cancel()
	return h.cfg.store.RecordHistory(ctx, batch...)
}

// release closes the flushes waiting for the queue to be written.
func (h *historian) release() {
	h.mu.Lock()
	flushes := h.flushes
	h.flushes = nil
	h.mu.Unlock()
	for _, f := range flushes {
		close(f)
	}
}

// prune deletes the rows older than the retention, by the database clock.
func (h *historian) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), historyWriteTimeout)
	defer cancel()
	n, err := h.cfg.store.PruneHistory(ctx, h.cfg.retention)
	switch {
	case err != nil:
		h.cfg.log.Error("pruning the instruction history failed", "err", err)
	case n > 0:
		h.cfg.log.Info("pruned the instruction history", "rows", n, "retention", h.cfg.retention)
	}
}

// flush returns once every row added before it is written (or, after
// close, given up).
func (h *historian) flush() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	done := make(chan struct{})
	h.flushes = append(h.flushes, done)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	select {
	case <-done:
	case <-h.done:
	}
}

// close writes what is queued and stops.
func (h *historian) close() {
	h.once.Do(func() { close(h.stop) })
	<-h.done
}
