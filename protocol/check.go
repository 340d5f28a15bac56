package protocol

import "fmt"

// SuccessKind is the outcome kind a successful answer to k must carry
// (§3.1 "Must answer with"), or "" for a kind outside the set.
func SuccessKind(k InstructionKind) OutcomeKind {
	switch k {
	case KindExec, KindExecStream:
		return OutcomeExec
	case KindReadTextFile, KindReadTextLines, KindReadBinaryFile:
		return OutcomeRead
	case KindWriteFile, KindWriteFileExclusive, KindWriteFileGuarded, KindCreateTempDir, KindCreateTempFile:
		return OutcomeWrite
	case KindAppendFile, KindCreateDir, KindRemove:
		return OutcomeVoid
	case KindFileInfo, KindListDir, KindCanonicalPath, KindExists, KindReadLink, KindStatBatch:
		return OutcomeStat
	}
	return ""
}

// OutcomeFits reports whether an outcome's kind fits the instruction's kind
// (§3.1, last paragraph). A cancelled outcome and any ok:false outcome always
// fit; a well-formed arm of another kind never does.
func OutcomeFits(k InstructionKind, o Outcome) bool {
	if o == nil {
		return false
	}
	if !o.OK() || o.Kind() == OutcomeCancelled {
		return true
	}
	return o.Kind() == SuccessKind(k)
}

// OutcomeError is an outcome the lane must refuse for its instruction.
type OutcomeError struct {
	Kind    InstructionKind
	Outcome OutcomeKind
	Detail  string
}

func (e *OutcomeError) Error() string {
	return fmt.Sprintf("protocol: a %q outcome does not answer %q: %s", e.Outcome, e.Kind, e.Detail)
}

// CheckOutcome is the lane's check of a result's outcome against its
// instruction: the kind fits (OutcomeFits), a stat arm carries the field the
// instruction asked for (info, entries, canonicalPath, existsValue or
// linkTarget; §3.1, §3.3), and a write arm carries canonicalPath. The
// exec-family stream checks (the exit chunk) belong to the stream, not here.
func CheckOutcome(k InstructionKind, o Outcome) error {
	if o == nil {
		return &OutcomeError{Kind: k, Detail: "no outcome"}
	}
	fail := func(format string, args ...any) error {
		return &OutcomeError{Kind: k, Outcome: o.Kind(), Detail: fmt.Sprintf(format, args...)}
	}
	if !OutcomeFits(k, o) {
		return fail("%q owes a %q outcome", k, SuccessKind(k))
	}
	switch o := o.(type) {
	case StatOutcome:
		return checkStat(k, o, fail)
	case WriteOutcome:
		if o.CanonicalPath == "" {
			return fail("the write arm requires canonicalPath")
		}
	case CancelledOutcome:
		if !o.State.Valid() {
			return fail("cancel state %q is not in DEVICE_CANCEL_STATES", o.State)
		}
	case Failure:
		if !o.ErrorCode.Valid() {
			return fail("errorCode %q is not in DEVICE_OUTCOME_ERROR_CODES", o.ErrorCode)
		}
	}
	return nil
}

func checkStat(k InstructionKind, o StatOutcome, fail func(string, ...any) error) error {
	switch k {
	case KindFileInfo:
		if o.Info == nil {
			return fail("fileInfo requires info")
		}
	case KindListDir:
		if o.Entries == nil {
			return fail("listDir requires entries (an empty array when the directory is empty)")
		}
	case KindCanonicalPath:
		if o.CanonicalPath == "" {
			return fail("canonicalPath requires canonicalPath")
		}
	case KindExists:
		if o.ExistsValue == nil {
			return fail("exists requires existsValue; omitting it is a protocol violation, not a false")
		}
	case KindReadLink:
		if o.LinkTarget == nil {
			return fail("readLink requires linkTarget (null when the path is not a symlink)")
		}
	}
	return nil
}
