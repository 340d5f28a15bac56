package lane

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// auditor writes audit rows from one goroutine, so that neither a request
// nor a device's frame path ever waits on the database. Its queue is
// bounded: under a flood the rows beyond it are counted and logged, never
// allowed to grow memory.
type auditor struct {
	st      store.Store
	log     *slog.Logger
	queue   chan auditItem
	dropped atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// auditItem is a row to write, or (with flushed set) a marker whose
// channel is closed once every row before it is written.
type auditItem struct {
	e       store.AuditEvent
	flushed chan struct{}
}

const auditQueue = 4096

func startAuditor(st store.Store, log *slog.Logger) *auditor {
	a := &auditor{st: st, log: log, queue: make(chan auditItem, auditQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

func (a *auditor) add(e store.AuditEvent) {
	select {
	case a.queue <- auditItem{e: e}:
	default:
		if a.dropped.Add(1)%1000 == 1 {
			a.log.Warn("audit queue full; rows dropped", "dropped", a.dropped.Load(), "event", e.Event)
		}
	}
}

func (a *auditor) run() {
	defer close(a.done)
	for {
		select {
		case it := <-a.queue:
			a.handle(it)
		case <-a.stop:
			for {
				select {
				case it := <-a.queue:
					a.handle(it)
				default:
					return
				}
			}
		}
	}
}

func (a *auditor) handle(it auditItem) {
	if it.flushed != nil {
		close(it.flushed)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.st.Audit(ctx, it.e); err != nil {
		a.log.Error("audit write failed", "event", it.e.Event, "reason", it.e.Reason, "err", err)
	}
}

// flush waits until every row queued before it is written.
func (a *auditor) flush() {
	done := make(chan struct{})
	select {
	case a.queue <- auditItem{flushed: done}:
		<-done
	case <-a.done:
	}
}

// close writes what is queued and stops.
func (a *auditor) close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
