package executor

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/tlshint"
	"github.com/sema-agent/sema/protocol"
)

// Runtime is one executor process's hold on the lane: one epoch, one
// instruction table and one outbox for its whole life, and a succession of
// sessions (one per socket) run by the reconnect loop in Run.
type Runtime struct {
	cfg       Config
	log       *slog.Logger
	epoch     string
	supports  []protocol.InstructionKind
	fileKinds []protocol.InstructionKind
	out       *outbox
	tab       *table
	status    *statusFile
	wsClient  *http.Client // cfg.HTTPClient, its writes coalesced (coalesce.go)
	procs     procRegistry
	staged    stagingRegistry

	mu       sync.Mutex
	sessions int // sockets that got past helloAck
}

// New builds a Runtime with a fresh epoch (§2.2: a new ULID per process
// start, R3).
func New(cfg Config) (*Runtime, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rt := &Runtime{cfg: cfg, log: cfg.Logger, epoch: ids.ULID(), wsClient: wsHTTPClient(cfg.HTTPClient)}
	rt.fileKinds = ops.FileKinds(&rt.cfg.Ops)
	rt.supports = Supports(rt.fileKinds)
	rt.out = newOutbox(outboxLimits{
		maxChunks:      cfg.MaxUnackedChunks,
		maxBytes:       cfg.MaxUnackedBytes,
		maxTotalBytes:  cfg.MaxOutboxBytes,
		maxResultSends: cfg.MaxResultSends,
		resultGiveUp:   cfg.ResultGiveUp,
	}, cfg.Clock)
	rt.tab = newTable(rt)
	rt.cfg.Ops.Prepare()
	rt.procs = procRegistry{dir: cfg.ProcDir, log: cfg.Logger}
	rt.staged = stagingRegistry{dir: cfg.StagingDir, log: cfg.Logger}
	rt.status = newStatusFile(cfg.StatusPath, cfg.DeviceID, cfg.Server, rt.epoch, cfg.Clock, cfg.Ops.Sandbox)
	return rt, nil
}

// Supports is the honest hello.supports: exec and execStream (ops.Exec)
// and the kinds ops.File implements (fileKinds), in the spec's order, never
// statBatch (not dispatched today, §8) and never a kind the set does not
// have. It is computed once and never varies within a process (§3.2).
func Supports(fileKinds []protocol.InstructionKind) []protocol.InstructionKind {
	var out []protocol.InstructionKind
	for _, k := range protocol.InstructionKinds() {
		if k == protocol.KindStatBatch {
			continue
		}
		if k.IsExec() || slices.Contains(fileKinds, k) {
			out = append(out, k)
		}
	}
	return out
}

// Epoch is this process's epoch.
func (rt *Runtime) Epoch() string { return rt.epoch }

// Supports returns the kinds this runtime declares.
func (rt *Runtime) Supports() []protocol.InstructionKind { return slices.Clone(rt.supports) }

// Run holds the lane until ctx ends (a graceful shutdown: nil) or the lane
// ends it for good (ErrRevoked, ErrSuperseded, *UpgradeRequiredError).
// Every other trouble — a refused dial, auth_failed, draining,
// already_connected, a dropped socket — is retried with jittered
// exponential backoff. When Run returns, every op it started has ended.
func (rt *Runtime) Run(ctx context.Context) (err error) {
	rt.log.Info("executor starting", "deviceId", rt.cfg.DeviceID, "server", rt.cfg.Server, "epoch", rt.epoch, "supports", len(rt.supports))
	defer func() {
		cause := errShutdown
		if err != nil {
			cause = errTerminal
		}
		rt.tab.stopAll(cause)
		rt.status.last(func(s *Status) { s.Connected, s.Gen, s.Inflight, s.Stopped = false, "", nil, true })
		rt.log.Info("executor stopped", "deviceId", rt.cfg.DeviceID, "err", err)
	}()
	rt.procs.reapOrphans() // before any hello: these belong to a dead executor
	rt.staged.sweep()
	bo := backoff{min: rt.cfg.MinBackoff, max: rt.cfg.MaxBackoff, rand: rt.cfg.Jitter}
	rt.status.update(func(s *Status) {})
	for {
		if ctx.Err() != nil {
			return nil
		}
		end := rt.connect(ctx)
		switch {
		case end.terminal != nil:
			return end.terminal
		case end.shutdown || ctx.Err() != nil:
			return nil
		}
		if end.handshook {
			bo.reset()
		}
		d := bo.next()
		if hint := tlshint.Untrusted(end.err); hint != "" {
			rt.log.Warn("disconnected from the lane; reconnecting", "in", d.String(), "err", end.err, "hint", hint)
		} else {
			rt.log.Warn("disconnected from the lane; reconnecting", "in", d.String(), "err", end.err)
		}
		rt.status.update(func(s *Status) { s.Connected, s.Gen, s.LastError = false, "", errString(end.err) })
		t := rt.cfg.Clock.NewTimer(d)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// sessionEnd is how one socket ended.
type sessionEnd struct {
	err       error // why, for the log
	handshook bool  // the lane accepted the hello
	shutdown  bool  // ended by our graceful shutdown
	terminal  error // ErrRevoked, ErrSuperseded, *UpgradeRequiredError
}

// checked holds an outcome to what the lane will accept for its kind and to
// the frame cap; an outcome that fails either is replaced by an honest
// outcome_unknown rather than sent to be refused (which would strand the
// instruction).
func (rt *Runtime) checked(e *entry, out protocol.Outcome) protocol.Outcome {
	if out == nil {
		return protocol.Fail(protocol.ErrOutcomeUnknown, "the executor produced no outcome for this instruction; whether its effect happened is unknown")
	}
	if e.kind != "" {
		if err := protocol.CheckOutcome(e.kind, out); err != nil {
			rt.log.Error("op returned an outcome the lane would refuse", "instructionId", e.id, "kind", e.kind, "err", err)
			return protocol.Fail(protocol.ErrOutcomeUnknown, "the executor produced an invalid outcome for this instruction; whether its effect happened is unknown")
		}
	}
	r := protocol.Result{Gen: 0, InstructionID: e.id, DeviceSeq: protocol.MaxSafeInteger, Outcome: out}
	if _, err := r.MarshalJSON(); err != nil {
		rt.log.Error("outcome cannot be encoded", "instructionId", e.id, "kind", e.kind, "err", err)
		return protocol.Fail(protocol.ErrOutcomeUnknown, "the executor could not encode this instruction's outcome; whether its effect happened is unknown")
	}
	return out
}

// giveUp drops a result the lane never acked, after the bound (R5): it is
// never escalated into re-execution.
func (rt *Runtime) giveUp(id, why string) {
	rt.log.Warn("result never acknowledged; given up locally", "instructionId", id, "why", why)
	rt.tab.release(id)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Held reports the bytes the outbox holds now and the most it ever held:
// what back-pressure keeps flat.
func (rt *Runtime) Held() (now, peak int64) { return rt.out.held() }

// Pending counts the instructions the runtime still holds something for
// (running, or a result not yet acked).
func (rt *Runtime) Pending() int { return rt.out.pending() }
