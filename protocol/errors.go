package protocol

import "fmt"

// FrameError is a frame refused at stage 1 (§2.4): exactly one reason from
// DEVICE_FRAME_REJECT_REASONS, the field at fault when there is one, and what
// was wrong. It never quotes the frame's content beyond the field's name.
type FrameError struct {
	Reason FrameRejectReason
	Field  string // dotted path, e.g. "outcome.exitCode"; "" for the whole frame
	Detail string
}

func (e *FrameError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("protocol: frame refused (%s): %s", e.Reason, e.Detail)
	}
	return fmt.Sprintf("protocol: frame refused (%s): %s: %s", e.Reason, e.Field, e.Detail)
}

// InstructionError is an instruction frame whose envelope is sound but which
// cannot be run as sent: its kind is unknown (Code not_supported) or its args
// or cwd do not fit the kind (Code invalid). The instruction is committed on
// the server (§5.0), so the executor must answer it: with a result carrying
// Failure{Code, Message: Detail} for InstructionID.
type InstructionError struct {
	InstructionID string
	Kind          InstructionKind
	Code          ErrorCode
	Detail        string
}

func (e *InstructionError) Error() string {
	return fmt.Sprintf("protocol: instruction %s (%s) cannot run: %s: %s", e.InstructionID, e.Kind, e.Code, e.Detail)
}

// Failure is the outcome that answers the instruction.
func (e *InstructionError) Failure() Failure {
	return Failure{ErrorCode: e.Code, Message: e.Detail}
}
