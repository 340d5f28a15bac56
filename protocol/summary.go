package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Summary is the one line a person reads for an instruction in a history
// or a journal: the command of an exec, the paths and byte counts of a
// file instruction — never a file's content or a command's output. With
// digestCommands, an exec's command is given as its SHA-256 (the first 16
// hex digits) and length instead, for records that must not hold it.
func Summary(kind InstructionKind, args Args, digestCommands bool) string {
	switch a := args.(type) {
	case CommandArgs:
		if digestCommands {
			sum := sha256.Sum256([]byte(a.Command))
			return "sha256:" + hex.EncodeToString(sum[:8]) + " (" + plural(len(a.Command), "byte") + ")"
		}
		return a.Command
	case PathArgs:
		return a.Path
	case ReadLinesArgs:
		s := a.Path
		if a.Offset != nil {
			s += " from line " + strconv.FormatInt(*a.Offset+1, 10)
		}
		if a.Limit != nil {
			s += " (at most " + plural(int(*a.Limit), "line") + ")"
		}
		return s
	case WriteArgs:
		return a.Path + " (" + plural(int(a.ContentLen), "byte") + ")"
	case DirArgs:
		if a.Recursive != nil && *a.Recursive {
			return a.Path + " (recursive)"
		}
		return a.Path
	case TempDirArgs:
		return a.Prefix + "*"
	case TempFileArgs:
		return a.Prefix + "*" + a.Suffix
	case StatBatchArgs:
		return strings.Join(a.Paths, " ")
	}
	return string(kind)
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// OutcomeLabel is the one word a record keeps of an outcome: ok for a
// success arm, cancelled:<state> for a cancel receipt (§5.3), the
// errorCode of a failure.
func OutcomeLabel(o Outcome) string {
	switch o := o.(type) {
	case Failure:
		return string(o.ErrorCode)
	case CancelledOutcome:
		return "cancelled:" + string(o.State)
	}
	return "ok"
}
