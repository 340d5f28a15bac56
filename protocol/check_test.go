package protocol

import (
	"errors"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// §3.1 "Must answer with": the success arm each kind owes.
func TestSuccessKindPerInstructionKind(t *testing.T) {
	want := map[InstructionKind]OutcomeKind{
		KindExec: OutcomeExec, KindExecStream: OutcomeExec,
		KindReadTextFile: OutcomeRead, KindReadTextLines: OutcomeRead, KindReadBinaryFile: OutcomeRead,
		KindWriteFile: OutcomeWrite, KindWriteFileExclusive: OutcomeWrite, KindWriteFileGuarded: OutcomeWrite,
		KindAppendFile: OutcomeVoid,
		KindFileInfo:   OutcomeStat, KindListDir: OutcomeStat, KindCanonicalPath: OutcomeStat,
		KindExists: OutcomeStat, KindReadLink: OutcomeStat,
		KindCreateDir: OutcomeVoid, KindRemove: OutcomeVoid,
		KindCreateTempDir: OutcomeWrite, KindCreateTempFile: OutcomeWrite,
		KindStatBatch: OutcomeStat,
	}
	for _, k := range InstructionKinds() {
		if got := SuccessKind(k); got != want[k] {
			t.Errorf("SuccessKind(%s) = %q, want %q", k, got, want[k])
		}
	}
	if got := SuccessKind("frob"); got != "" {
		t.Errorf(`SuccessKind("frob") = %q, want ""`, got)
	}
}

// successArm is a well-formed success arm of each kind, complete for any
// instruction that owes it.
func successArm(k OutcomeKind) Outcome {
	switch k {
	case OutcomeExec:
		return ExecOutcome{ExitCode: 0}
	case OutcomeRead:
		return ReadOutcome{}
	case OutcomeStat:
		return StatOutcome{
			Info: &FileInfo{Path: "/a", Kind: FileKindFile}, Entries: []FileInfo{},
			ExistsValue: ptr(true), CanonicalPath: "/a", LinkTarget: &LinkTarget{},
		}
	case OutcomeWrite:
		return WriteOutcome{CanonicalPath: "/a"}
	case OutcomeVoid:
		return VoidOutcome{}
	}
	return nil
}

// §3.1 last paragraph: the server checks the outcome kind against the
// instruction kind; answering execStream with {ok:true, kind:"void"} is a
// protocol violation. cancelled and ok:false always fit.
func TestOutcomeKindMustFitInstructionKind(t *testing.T) {
	arms := []OutcomeKind{OutcomeExec, OutcomeRead, OutcomeStat, OutcomeWrite, OutcomeVoid}
	for _, k := range InstructionKinds() {
		for _, arm := range arms {
			o := successArm(arm)
			fits := OutcomeFits(k, o)
			if want := arm == SuccessKind(k); fits != want {
				t.Errorf("OutcomeFits(%s, %s arm) = %v, want %v", k, arm, fits, want)
			}
			err := CheckOutcome(k, o)
			if (err == nil) != fits {
				t.Errorf("CheckOutcome(%s, %s arm) = %v, want ok=%v", k, arm, err, fits)
			}
			var oe *OutcomeError
			if err != nil && (!errors.As(err, &oe) || oe.Kind != k || oe.Outcome != arm) {
				t.Errorf("CheckOutcome(%s, %s arm) error %v does not name both kinds", k, arm, err)
			}
		}
	}
}

func TestCancelledAndFailureOutcomesAlwaysFit(t *testing.T) {
	for _, k := range InstructionKinds() {
		for _, o := range []Outcome{
			CancelledOutcome{State: CancelNotStarted},
			CancelledOutcome{State: CancelKilled},
			Failure{ErrorCode: ErrOutcomeUnknown, Message: "lost"},
		} {
			if !OutcomeFits(k, o) {
				t.Errorf("OutcomeFits(%s, %#v) = false, want true", k, o)
			}
			if err := CheckOutcome(k, o); err != nil {
				t.Errorf("CheckOutcome(%s, %#v) = %v", k, o, err)
			}
		}
	}
}

// §3.3: on the stat arm only the field the instruction asked for is
// required; §3.1: exists without existsValue is a violation, not a false.
func TestStatArmRequiresTheFieldTheInstructionAskedFor(t *testing.T) {
	tests := []struct {
		kind    InstructionKind
		present StatOutcome
	}{
		{KindFileInfo, StatOutcome{Info: &FileInfo{Path: "/a", Kind: FileKindDir}}},
		{KindListDir, StatOutcome{Entries: []FileInfo{}}},
		{KindCanonicalPath, StatOutcome{CanonicalPath: "/real"}},
		{KindExists, StatOutcome{ExistsValue: ptr(false)}},
		{KindReadLink, StatOutcome{LinkTarget: &LinkTarget{}}},
		{KindReadLink, StatOutcome{LinkTarget: &LinkTarget{IsSymlink: true, Target: "/t"}}},
	}
	for _, tt := range tests {
		if err := CheckOutcome(tt.kind, tt.present); err != nil {
			t.Errorf("CheckOutcome(%s, %+v) = %v, want ok", tt.kind, tt.present, err)
		}
		// Every other stat field, without the one asked for, is refused.
		others := successArm(OutcomeStat).(StatOutcome)
		switch tt.kind {
		case KindFileInfo:
			others.Info = nil
		case KindListDir:
			others.Entries = nil
		case KindCanonicalPath:
			others.CanonicalPath = ""
		case KindExists:
			others.ExistsValue = nil
		case KindReadLink:
			others.LinkTarget = nil
		}
		if err := CheckOutcome(tt.kind, others); err == nil {
			t.Errorf("CheckOutcome(%s) accepted a stat arm without the field it asked for", tt.kind)
		}
	}
}

func TestWriteArmRequiresCanonicalPath(t *testing.T) {
	for _, k := range []InstructionKind{KindWriteFile, KindWriteFileExclusive, KindWriteFileGuarded, KindCreateTempDir, KindCreateTempFile} {
		if err := CheckOutcome(k, WriteOutcome{Inode: "12", Created: ptr(true)}); err == nil {
			t.Errorf("CheckOutcome(%s) accepted a write arm without canonicalPath", k)
		}
		if err := CheckOutcome(k, WriteOutcome{CanonicalPath: "/a"}); err != nil {
			t.Errorf("CheckOutcome(%s, canonicalPath only) = %v", k, err)
		}
	}
}

func TestCheckOutcomeRefusesValuesOutsideTheClosedSets(t *testing.T) {
	if err := CheckOutcome(KindExec, nil); err == nil {
		t.Error("CheckOutcome accepted a nil outcome")
	}
	if err := CheckOutcome(KindExec, CancelledOutcome{State: "paused"}); err == nil {
		t.Error("CheckOutcome accepted a cancel state outside DEVICE_CANCEL_STATES")
	}
	if err := CheckOutcome(KindExec, Failure{ErrorCode: "oops", Message: "x"}); err == nil {
		t.Error("CheckOutcome accepted an errorCode outside DEVICE_OUTCOME_ERROR_CODES")
	}
}

func TestArgsPath(t *testing.T) {
	for _, tt := range []struct {
		a    Args
		want string
	}{
		{PathArgs{Path: "/a"}, "/a"}, {ReadLinesArgs{Path: "/b"}, "/b"}, {WriteArgs{Path: "/c"}, "/c"},
		{DirArgs{Path: "/d"}, "/d"}, {CommandArgs{Command: "ls /e"}, ""}, {TempFileArgs{Prefix: "x"}, ""}, {nil, ""},
	} {
		if got := ArgsPath(tt.a); got != tt.want {
			t.Errorf("ArgsPath(%#v) = %q, want %q", tt.a, got, tt.want)
		}
	}
}
