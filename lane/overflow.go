package lane

import (
	"fmt"

	"github.com/sema-agent/sema/protocol"
)

// deliveryOverflow handles a chunk the pending-delivery bound refused (§4:
// "its overflow cancels the remote command"), d.mu held: the first time,
// the lane logs and counts it and cancels the command; the settlement, when
// the device answers, is the lane's own failure (overflowOutcome). With our
// executor this cannot happen (backlog.go); a device that runs ahead of its
// acknowledgements makes it happen.
func (s *Server) deliveryOverflow(d *deviceState, call *Call, seq int64) {
	if call.droppedFrom >= 0 {
		return
	}
	call.droppedFrom = seq
	s.metrics.deliveryOverflows.Add(1)
	s.log.Warn("lane: cancelling an instruction: its output outran the pending-delivery bound (the device sent past its acknowledgements, or its reader fell behind)",
		"device", d.id, "instruction", call.ID, "streamSeq", seq,
		"boundBytes", s.cfg.DeliveryBytes, "boundChunks", s.cfg.DeliveryEntries)
	call.cancelWant = true
	s.deliverCancel(d, call)
}

// overflowOutcome is how a call whose output the bound cut settles: never
// the device's answer as it stands, since the caller did not get all the
// output. outcome_unknown stays outcome_unknown (it is the stronger
// warning); anything else becomes aborted, "the work stopped because it
// was cancelled" (§3.3), with the device's answer in the message.
func (s *Server) overflowOutcome(call *Call, o protocol.Outcome) protocol.Outcome {
	why := fmt.Sprintf("the lane cancelled the command: its output outran the pending-delivery bound (§4: %d bytes / %d chunks waiting for the caller), so output from streamSeq %d on was dropped",
		s.cfg.DeliveryBytes, s.cfg.DeliveryEntries, call.droppedFrom)
	if f, ok := o.(protocol.Failure); ok && f.ErrorCode == protocol.ErrOutcomeUnknown {
		return laneFailure(protocol.ErrOutcomeUnknown, "%s; then: %s", why, f.Message)
	}
	return laneFailure(protocol.ErrAborted, "%s; the device answered: %s", why, describeOutcome(o))
}

// describeOutcome says in words what a device answered.
func describeOutcome(o protocol.Outcome) string {
	switch o := o.(type) {
	case protocol.CancelledOutcome:
		if o.State == protocol.CancelNotStarted {
			return "cancelled before it started"
		}
		return "cancelled, killed while running (side effects up to then may exist)"
	case protocol.ExecOutcome:
		return fmt.Sprintf("exit code %d (it finished before the cancel took effect)", o.ExitCode)
	case protocol.Failure:
		return fmt.Sprintf("%s: %s", o.ErrorCode, o.Message)
	case nil:
		return "nothing"
	default:
		return fmt.Sprintf("a %s outcome", o.Kind())
	}
}
