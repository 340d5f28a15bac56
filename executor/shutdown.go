package executor

import (
	"context"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// shutdown is R15 and §1.6: goodbye, let in-flight work finish within the
// grace, stop what is left (answered aborted), and give the results a
// bounded time to be acked. Instructions that arrive meanwhile are failed
// explicitly (see receive). It reports whether the goodbye was written:
// only then may the socket be closed with a close handshake.
func (s *session) shutdown(sctx context.Context) (goodbyeWritten bool) {
	rt := s.rt
	s.goodbye.Store(true)
	// One timer bounds the goodbye's write and the in-flight work: a lane
	// that does not read the goodbye within the grace would not read the
	// results either.
	grace := rt.cfg.Clock.NewTimer(rt.cfg.ShutdownGrace)
	defer grace.Stop()
	if !s.sayGoodbye(sctx, grace.C()) {
		return false
	}
	inflight := rt.tab.inflight()
	rt.log.Info("goodbye sent; finishing in-flight work", "inflight", len(inflight), "grace", rt.cfg.ShutdownGrace.String())
	rt.status.update(func(st *Status) { st.Stopping, st.Inflight = true, inflight })
	if !rt.waitUntil(sctx, grace.C(), func() bool { return len(rt.tab.inflight()) == 0 }) && sctx.Err() == nil {
		rt.log.Warn("in-flight work did not finish within the grace; stopping it", "inflight", len(rt.tab.inflight()))
		rt.tab.stopAll(errShutdown)
	}
	flush := rt.cfg.Clock.NewTimer(rt.cfg.FlushTimeout)
	defer flush.Stop()
	if !rt.waitUntil(sctx, flush.C(), func() bool { return rt.out.pending() == 0 }) {
		rt.log.Warn("some results were not acknowledged before exit", "held", rt.out.pending())
	}
	return true
}

// sayGoodbye hands the goodbye to the writer and waits until its write has
// returned (§1.6: the goodbye must be on the wire before the socket closes),
// the socket ends, or deadline fires. It logs why when the goodbye was not
// written.
func (s *session) sayGoodbye(sctx context.Context, deadline <-chan time.Time) bool {
	rt := s.rt
	graceMs := (rt.cfg.ShutdownGrace + rt.cfg.FlushTimeout).Milliseconds()
	written := make(chan error, 1)
	bye := ctrlFrame{f: &protocol.Goodbye{Gen: s.gen, Reason: protocol.GoodbyeShutdown, GraceMs: &graceMs}, written: written}
	notWritten := func(why string, args ...any) bool {
		rt.log.Warn("goodbye not sent: "+why+"; the lane sees the socket drop instead", args...)
		return false
	}
	select {
	case s.ctrl <- bye:
	case <-sctx.Done():
		return notWritten("the socket ended first", "err", context.Cause(sctx))
	case <-deadline:
		return notWritten("the writer did not take it within the grace", "grace", rt.cfg.ShutdownGrace.String())
	}
	wrote := func(err error) bool {
		if err != nil {
			return notWritten("its write failed", "err", err)
		}
		return true
	}
	select {
	case err := <-written:
		return wrote(err)
	case <-sctx.Done():
		// The writer reports a write that returned before it ends.
		select {
		case err := <-written:
			return wrote(err)
		default:
			return notWritten("the socket ended first", "err", context.Cause(sctx))
		}
	case <-deadline:
		return notWritten("its write did not return within the grace (the lane is not reading)", "grace", rt.cfg.ShutdownGrace.String())
	}
}

// waitUntil waits until cond holds (rechecked whenever the outbox or the
// table changes), deadline fires (false) or ctx ends (false).
func (rt *Runtime) waitUntil(ctx context.Context, deadline <-chan time.Time, cond func() bool) bool {
	for {
		ch := rt.out.changed()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return cond()
		case <-ctx.Done():
			return false
		}
	}
}
