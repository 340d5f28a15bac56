package executor

import (
	"context"
	"time"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/protocol"
)

// receive registers a parsed instruction (R1) and starts it, or answers it
// explicitly when it must not run. It never drops one: the lane crossed its
// one-way commit before sending it (§5.0).
func (rt *Runtime) receive(s *session, in *protocol.Instruction) {
	probe.Mark(probe.ExecReceived)
	e := rt.tab.add(in.InstructionID, in.Kind)
	if e == nil {
		rt.log.Warn("an instruction id arrived twice; the second is ignored and never run", "instructionId", in.InstructionID)
		return
	}
	rt.log.Info("instruction received", "instructionId", in.InstructionID, "kind", in.Kind, "timeoutMs", in.TimeoutMs)
	switch {
	case in.Gen != s.gen:
		rt.tab.answerNow(e, protocol.Fail(protocol.ErrInvalid,
			"the instruction is stamped with generation %s but this connection is generation %s; it was not run", in.Gen, s.gen))
	case s.goodbye.Load():
		rt.tab.answerNow(e, protocol.Fail(protocol.ErrTargetUnavailable,
			"the executor is shutting down (goodbye sent); this instruction was not started"))
	case !rt.declared(in.Kind):
		rt.tab.answerNow(e, protocol.Fail(protocol.ErrNotSupported, "this executor does not declare %s", in.Kind))
	default:
		rt.tab.start(e, ops.Request{
			InstructionID: in.InstructionID,
			Kind:          in.Kind,
			Args:          in.Args,
			Cwd:           in.Cwd,
			ShellEnv:      in.ShellEnv,
			Timeout:       time.Duration(in.TimeoutMs) * time.Millisecond,
			Payload:       e.payload,
		})
	}
}

// receiveInvalid answers an instruction whose kind, args or cwd cannot be
// run as sent, with the failure the decoder named.
func (rt *Runtime) receiveInvalid(s *session, ie *protocol.InstructionError) {
	e := rt.tab.add(ie.InstructionID, "")
	if e == nil {
		return
	}
	rt.log.Warn("instruction refused as sent", "instructionId", ie.InstructionID, "kind", ie.Kind, "code", ie.Code)
	rt.tab.answerNow(e, ie.Failure())
}

// receiveCancel handles cancel (R11). A cancel for an id this process never
// received answers not_started: the work never began here.
func (rt *Runtime) receiveCancel(id string) {
	if rt.tab.cancel(id) {
		return
	}
	if e := rt.tab.add(id, ""); e != nil {
		rt.log.Warn("cancel for an instruction this executor never received; answered not_started", "instructionId", id)
		rt.tab.answerNow(e, protocol.CancelledOutcome{State: protocol.CancelNotStarted})
	}
}

func (rt *Runtime) declared(k protocol.InstructionKind) bool {
	for _, s := range rt.supports {
		if s == k {
			return true
		}
	}
	return false
}

// routePayload hands a payload frame to its write op, in order. It blocks
// while the op's queue is full (the op writes to disk, which is quick), but
// never past the op's end or the socket's.
func (rt *Runtime) routePayload(ctx context.Context, p *protocol.Payload) {
	e := rt.tab.get(p.InstructionID)
	if e == nil || e.payload == nil || e.payEnd {
		rt.log.Warn("dropped a payload frame for no running write", "instructionId", p.InstructionID, "part", p.Part)
		return
	}
	select {
	case e.payload <- p:
		if p.Part == protocol.PartCommit {
			e.payEnd = true
			close(e.payload) // nothing follows a commit (§3.4)
		}
	case <-e.done:
	case <-ctx.Done():
	}
}
