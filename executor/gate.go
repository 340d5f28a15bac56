package executor

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// Gate decides, before an instruction's op starts, whether it may run
// (Config.Gate; package executor/approve is the approval device's). Run is
// called once per instruction, in the op's goroutine, with the
// instruction's context (cancelled with the runtime's causes: a server
// cancel, fence, shutdown). It either calls run once — with req, or with
// req.Timeout reduced by the time it took — and returns run's outcome, or
// returns the outcome that answers the instruction without calling run.
// It must return promptly once ctx ends.
type Gate interface {
	Run(ctx context.Context, req ops.Request, run func(ops.Request) protocol.Outcome) protocol.Outcome
}

// gatedOp runs e's op through the configured Gate, if any. A Gate that
// panics is answered honestly: permission_denied if the op never started,
// outcome_unknown if it had.
func (rt *Runtime) gatedOp(e *entry, req ops.Request) (out protocol.Outcome) {
	g := rt.cfg.Gate
	if g == nil {
		return rt.runOp(e, req)
	}
	var started atomic.Bool
	defer func() {
		if p := recover(); p != nil {
			rt.log.Error("the instruction gate panicked", "instructionId", e.id, "kind", e.kind, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if started.Load() {
				out = protocol.Fail(protocol.ErrOutcomeUnknown, "the executor failed while running this instruction; whether its effect happened is unknown")
			} else {
				out = protocol.Fail(protocol.ErrPermissionDenied, "the executor's instruction gate failed before this instruction started; it was not run")
			}
		}
	}()
	if a, ok := g.(asker); !ok || a.Asks(req) {
		defer func() {
			if started.Load() {
				e.approval.Store(approvalAllowed)
			} else {
				e.approval.Store(approvalRefused)
			}
		}()
	}
	return g.Run(e.ctx, req, func(r ops.Request) protocol.Outcome {
		if started.Swap(true) {
			panic("executor: a Gate called run twice")
		}
		return rt.runOp(e, r)
	})
}

// asker is a Gate that can tell whether it asks a person about an
// instruction; the journal then records a decision only for those it asked.
type asker interface{ Asks(ops.Request) bool }

// The gate's decision as the journal records it: the op ran, or it did not
// (denied on the device, the approval expired, no device).
const (
	approvalAllowed = "allowed"
	approvalRefused = "refused"
)
