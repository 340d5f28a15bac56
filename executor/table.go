package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// The instruction table: one entry per instructionId from the moment its
// frame is parsed (R1) until the lane releases its result (resultAck), the
// fence writes it off, or the outbox gives it up. An id is then remembered
// in a bounded set so that it can never run again (§5.4).

// Causes the runtime stops an op with. None is ops.ErrCancelled: only a
// server cancel answers cancelled (ops.go).
var (
	errFenced   = errors.New("the lane no longer lists this instruction after a reconnect (fence, §1.5)")
	errShutdown = errors.New("the executor is shutting down")
	errTerminal = errors.New("the executor is stopping for good (revoked, superseded or upgrade required)")
	errOverdue  = errors.New("the instruction ran past its timeout and the executor's backstop")
)

// entry is one instruction.
type entry struct {
	id      string
	kind    protocol.InstructionKind
	ctx     context.Context
	stop    context.CancelCauseFunc
	done    chan struct{}          // closed when the op has returned (at once when none runs)
	payload chan *protocol.Payload // write family only
	running atomic.Bool            // the op goroutine has not returned
	answer  atomic.Bool            // the result has been put in the outbox
	tmu     sync.Mutex
	timers  []Timer   // backstops; stopped when answered
	cancels int       // server cancels received
	started time.Time // for the status file
	payEnd  bool      // payload channel closed (only the reader touches it)
	// deadGroup is the op's process group once it is known dead (set by
	// runOp): its record is forgotten after the answer is queued, so the
	// unlink is not on the instruction's path.
	deadGroup int
	// For the journal: the approval decision (allowed, refused; "" with no
	// gate) and the bytes the op sent, by chunk kind.
	approval                   atomic.Value // string
	sentOut, sentErr, sentData atomic.Int64
}

// count adds n bytes of a chunk of kind to what e's op sent.
func (e *entry) count(kind protocol.ChunkKind, n int) {
	switch kind {
	case protocol.ChunkStdout:
		e.sentOut.Add(int64(n))
	case protocol.ChunkStderr:
		e.sentErr.Add(int64(n))
	case protocol.ChunkData:
		e.sentData.Add(int64(n))
	}
}

type table struct {
	rt *Runtime

	mu      sync.Mutex
	entries map[string]*entry
	gone    map[string]struct{} // released ids, bounded by goneOrder
	gonesq  []string
	wg      sync.WaitGroup // op goroutines
}

const goneMemory = 4096

func newTable(rt *Runtime) *table {
	return &table{rt: rt, entries: map[string]*entry{}, gone: map[string]struct{}{}}
}

// known reports whether id is in flight or was released: either way it must
// never start (again).
func (t *table) knownLocked(id string) bool {
	_, in := t.entries[id]
	_, was := t.gone[id]
	return in || was
}

func (t *table) forgetLocked(id string) {
	delete(t.entries, id)
	if _, ok := t.gone[id]; ok {
		return
	}
	t.gone[id] = struct{}{}
	t.gonesq = append(t.gonesq, id)
	if len(t.gonesq) > goneMemory {
		delete(t.gone, t.gonesq[0])
		t.gonesq = slices.Delete(t.gonesq, 0, 1)
	}
}

// release forgets id after its result was acked or given up.
func (t *table) release(id string) {
	t.mu.Lock()
	e := t.entries[id]
	t.forgetLocked(id)
	t.mu.Unlock()
	if e != nil {
		e.stopTimers()
	}
	t.rt.out.drop(id)
}

// add registers a freshly parsed instruction id. It returns nil when the id
// is already known (a duplicate must never run twice, nor be answered twice).
func (t *table) add(id string, kind protocol.InstructionKind) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.knownLocked(id) {
		return nil
	}
	return t.addLocked(id, kind)
}

func (t *table) addLocked(id string, kind protocol.InstructionKind) *entry {
	ctx, stop := context.WithCancelCause(context.Background())
	e := &entry{id: id, kind: kind, ctx: ctx, stop: stop, done: make(chan struct{}), started: t.rt.cfg.Clock.Now()}
	if kind.IsWrite() {
		e.payload = make(chan *protocol.Payload, 16)
	}
	t.entries[id] = e
	t.rt.out.open(id)
	return e
}

func (t *table) get(id string) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[id]
}

// answerNow answers an entry that runs no op.
func (t *table) answerNow(e *entry, out protocol.Outcome) {
	close(e.done)
	t.answer(e, out)
}

// answer puts e's one terminal result in the outbox; later answers (an op
// returning after a backstop answered for it) are dropped.
func (t *table) answer(e *entry, out protocol.Outcome) {
	if !e.answer.CompareAndSwap(false, true) {
		if out != nil {
			t.rt.log.Warn("a second answer for an instruction was dropped", "instructionId", e.id, "kind", e.kind)
		}
		return
	}
	e.stopTimers()
	out = t.rt.checked(e, out)
	t.rt.journalEnd(e, out)
	if _, ok := t.rt.out.putResult(e.id, out); !ok {
		t.rt.log.Warn("no stream to hold the result; dropped", "instructionId", e.id)
	}
	t.rt.log.Info("instruction answered", "instructionId", e.id, "kind", e.kind, "outcome", outcomeWord(out))
	t.rt.status.soon(func(st *Status) { st.Inflight = t.inflight() })
}

func (e *entry) stopTimers() {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	for _, tm := range e.timers {
		tm.Stop()
	}
	e.timers = nil
}

// addTimer arms a backstop for e, unless e is already answered.
func (e *entry) addTimer(arm func() Timer) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	if e.answer.Load() {
		return
	}
	e.timers = append(e.timers, arm())
}

// start runs the op of e in its own goroutine.
func (t *table) start(e *entry, req ops.Request) {
	t.rt.journalStart(e, req)
	e.running.Store(true)
	t.rt.status.soon(func(st *Status) { st.Inflight = t.inflight() })
	t.wg.Add(1)
	if req.Timeout > 0 {
		e.addTimer(func() Timer {
			return t.rt.cfg.Clock.AfterFunc(req.Timeout+t.rt.cfg.TimeoutBackstop, func() {
				t.overdue(e, fmt.Sprintf("the instruction did not end within its timeout of %v; it was stopped, and whether its effect happened is unknown", req.Timeout))
			})
		})
	}
	go func() {
		defer t.wg.Done()
		defer close(e.done)
		defer t.rt.out.poke()
		defer e.running.Store(false)
		out := t.rt.gatedOp(e, req)
		t.answer(e, out)
		if e.deadGroup != 0 {
			t.rt.procs.remove(e.deadGroup)
		}
	}()
}

// overdue is a backstop: the op has not answered in time. Its context is
// stopped and the instruction answered outcome_unknown now, rather than
// never (R11, R12: "prefer answering late-but-honestly over not answering").
func (t *table) overdue(e *entry, why string) {
	select {
	case <-e.done:
		return
	default:
	}
	e.stop(errOverdue)
	t.rt.log.Warn("instruction overdue; answered outcome_unknown", "instructionId", e.id, "kind", e.kind)
	t.answer(e, protocol.Fail(protocol.ErrOutcomeUnknown, "%s", why))
}

// cancel handles a server cancel (R11): idempotent; the op's context ends
// with ops.ErrCancelled and the op answers cancelled or its ordinary
// outcome. It reports whether the id is known.
func (t *table) cancel(id string) bool {
	t.mu.Lock()
	e := t.entries[id]
	known := t.knownLocked(id)
	if e != nil {
		e.cancels++
	}
	first := e != nil && e.cancels == 1
	t.mu.Unlock()
	if e == nil {
		return known
	}
	if !first {
		return true // a repeated cancel is a no-op
	}
	e.stop(ops.ErrCancelled)
	e.addTimer(func() Timer {
		return t.rt.cfg.Clock.AfterFunc(t.rt.cfg.CancelAnswerBudget, func() {
			t.overdue(e, fmt.Sprintf("the instruction was cancelled but did not confirm it stopped within %v", t.rt.cfg.CancelAnswerBudget))
		})
	})
	return true
}

// inflight lists the instructions still being worked on (op running, not
// yet answered), oldest first: the heartbeat's inflight (R14).
func (t *table) inflight() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*entry
	for _, e := range t.entries {
		if e.running.Load() && !e.answer.Load() {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int { return a.started.Compare(b.started) })
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.id
	}
	return ids
}

// all returns every entry.
func (t *table) all() []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	return out
}

// fence applies §1.5 before generationAck: every entry not in listed is
// stopped (cause errFenced), waited for, and forgotten with its buffers. It
// returns an error, and leaves the rest for the next socket, if some op did
// not end within wait. Listed ids this process never received are returned
// in unknown; listed ids it received and has since forgotten (fenced under
// an earlier generation, or answered and released) in forgotten.
func (t *table) fence(listed []string, wait time.Duration) (unknown, forgotten []string, err error) {
	keep := make(map[string]bool, len(listed))
	for _, id := range listed {
		keep[id] = true
	}
	var victims []*entry
	t.mu.Lock()
	for id, e := range t.entries {
		if !keep[id] {
			victims = append(victims, e)
		}
	}
	for _, id := range listed {
		_, in := t.entries[id]
		_, was := t.gone[id]
		switch {
		case !in && was:
			forgotten = append(forgotten, id)
		case !in:
			unknown = append(unknown, id)
		}
	}
	t.mu.Unlock()

	for _, e := range victims {
		e.stop(errFenced)
		t.rt.out.closeStream(e.id)
	}
	deadline := t.rt.cfg.Clock.NewTimer(wait)
	defer deadline.Stop()
	for _, e := range victims {
		select {
		case <-e.done:
		case <-deadline.C():
			return unknown, forgotten, fmt.Errorf("fenced instruction %s did not stop within %v", e.id, wait)
		}
	}
	for _, e := range victims {
		t.rt.log.Info("fenced: instruction written off by the lane; stopped and forgotten", "instructionId", e.id, "kind", e.kind)
		t.release(e.id)
	}
	return unknown, forgotten, nil
}

// readmit takes back a forgotten id for its one answer, which the lane
// still waits for (it lists the id as pending); nil if it is in flight or
// was never received. Its place in the bounded memory of released ids is
// taken anew when it is released again.
func (t *table) readmit(id string) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, was := t.gone[id]; !was {
		return nil
	}
	delete(t.gone, id)
	if i := slices.Index(t.gonesq, id); i >= 0 {
		t.gonesq = slices.Delete(t.gonesq, i, i+1)
	}
	return t.addLocked(id, "")
}

// stopAll stops every op with cause and waits for all of them.
func (t *table) stopAll(cause error) {
	for _, e := range t.all() {
		e.stop(cause)
		t.rt.out.closeStream(e.id)
	}
	t.wg.Wait()
}

// endPayloads closes the payload channel of every write whose payload did
// not complete: after a socket ends, no more of it will come (R1). Only the
// session's reader sends on these channels, and it has returned.
func (t *table) endPayloads() {
	for _, e := range t.all() {
		if e.payload != nil && !e.payEnd {
			e.payEnd = true
			close(e.payload)
		}
	}
}

// runOp runs one op, converting a panic into an honest outcome.
func (rt *Runtime) runOp(e *entry, req ops.Request) (out protocol.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			rt.log.Error("op panicked", "instructionId", e.id, "kind", e.kind, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out = protocol.Fail(protocol.ErrOutcomeUnknown, "the executor failed while running this instruction; whether its effect happened is unknown")
		}
	}()
	sink := &opSink{ctx: e.ctx, out: rt.out, id: e.id, e: e}
	switch {
	case req.Kind.IsExec():
		pgid := 0
		req.Spawned = func(g int) { pgid = g; rt.procs.add(g) }
		defer func() {
			if pgid != 0 && out != nil && !isUnknown(out) {
				e.deadGroup = pgid // the group is dead; an outcome_unknown keeps its record
			}
		}()
		return ops.Exec(e.ctx, &rt.cfg.Ops, req, sink)
	case slices.Contains(rt.fileKinds, req.Kind):
		req.Staged = rt.staged.add
		return ops.File(e.ctx, &rt.cfg.Ops, req, sink)
	}
	return protocol.Fail(protocol.ErrNotSupported, "%s is not implemented by this executor", req.Kind)
}

// opSink is an op's Sink: its chunks go to the outbox, numbered there, and
// block on back-pressure until acks free room or the op is stopped.
type opSink struct {
	ctx context.Context
	out *outbox
	id  string
	e   *entry
}

func (s *opSink) Data(kind protocol.ChunkKind, p []byte) error {
	if kind == protocol.ChunkExit {
		return errors.New("an exit chunk goes through Exit")
	}
	if len(p) == 0 {
		return nil // never a flood of empty chunks (§4)
	}
	s.e.count(kind, len(p))
	return s.out.putChunk(s.ctx, s.id, kind, p, 0)
}

func (s *opSink) Exit(code int) error {
	return s.out.putChunk(s.ctx, s.id, protocol.ChunkExit, nil, code)
}

// outcomeWord names an outcome for logs without its content.
func outcomeWord(o protocol.Outcome) string {
	if f, ok := o.(protocol.Failure); ok {
		return "error:" + string(f.ErrorCode)
	}
	if c, ok := o.(protocol.CancelledOutcome); ok {
		return "cancelled:" + string(c.State)
	}
	if o == nil {
		return "none"
	}
	return string(o.Kind())
}

// isUnknown reports an outcome_unknown failure: the op could not confirm
// that its process group is dead.
func isUnknown(o protocol.Outcome) bool {
	f, ok := o.(protocol.Failure)
	return ok && f.ErrorCode == protocol.ErrOutcomeUnknown
}
