package protocol

import (
	"fmt"

	"github.com/go-json-experiment/json"
)

// Outcome is the outcome of a result frame (§3.3): exactly one of
// ExecOutcome, ReadOutcome, StatOutcome, WriteOutcome, VoidOutcome,
// CancelledOutcome (the ok:true arms) or Failure (ok:false).
type Outcome interface {
	// Kind is the arm's kind; Failure has none and returns "".
	Kind() OutcomeKind
	// OK reports whether this is a success arm.
	OK() bool
	isOutcome()
}

// ExecOutcome answers exec and execStream.
type ExecOutcome struct {
	ExitCode  int        `json:"exitCode"`
	Truncated *Truncated `json:"truncated,omitzero"`
}

// Truncated says which streams lost output to a cap.
type Truncated struct {
	Stdout bool `json:"stdout"`
	Stderr bool `json:"stderr"`
}

// ReadOutcome answers the read family; the bytes travelled as data chunks.
type ReadOutcome struct{}

// StatOutcome answers fileInfo, listDir, canonicalPath, exists, readLink and
// statBatch. Only the field the instruction asked for is required (see
// CheckOutcome); the others stay at their zero value and are omitted.
type StatOutcome struct {
	Info *FileInfo `json:"info,omitzero"`
	// Entries is absent when nil; a non-nil empty slice is the empty listing.
	Entries []FileInfo `json:"entries,omitzero"`
	// ExistsValue is absent when nil; false is sent as false, never omitted.
	ExistsValue   *bool       `json:"existsValue,omitzero"`
	CanonicalPath string      `json:"canonicalPath,omitzero"`
	LinkTarget    *LinkTarget `json:"linkTarget,omitzero"`
}

// LinkTarget is readLink's answer: a symlink's target, or JSON null for "not a
// symlink" (§3.1).
type LinkTarget struct {
	IsSymlink bool
	Target    string
}

// MarshalJSON writes the target string, or null when the path is no symlink.
func (l LinkTarget) MarshalJSON() ([]byte, error) {
	if !l.IsSymlink {
		return []byte("null"), nil
	}
	return json.Marshal(l.Target)
}

// FileInfo is WireFileInfo (§3.3).
type FileInfo struct {
	Path    string   `json:"path"`
	Kind    FileKind `json:"kind"`
	Size    int64    `json:"size"`
	MtimeMs int64    `json:"mtimeMs"`
	Mode    *uint32  `json:"mode,omitzero"`
}

// WriteOutcome answers the write family, createTempDir and createTempFile.
// CanonicalPath, the real on-disk object written, is required.
type WriteOutcome struct {
	CanonicalPath string `json:"canonicalPath"`
	Inode         string `json:"inode,omitzero"`
	Created       *bool  `json:"created,omitzero"`
}

// VoidOutcome answers appendFile, createDir and remove.
type VoidOutcome struct{}

// CancelledOutcome is the cancel receipt (§5.3).
type CancelledOutcome struct {
	State CancelState `json:"state"`
}

// Failure is the ok:false arm. Message is shown to the model.
type Failure struct {
	ErrorCode ErrorCode `json:"errorCode"`
	Message   string    `json:"message"`
}

// Fail builds a Failure with a formatted message.
func Fail(code ErrorCode, format string, args ...any) Failure {
	return Failure{ErrorCode: code, Message: fmt.Sprintf(format, args...)}
}

// String describes the failure for people.
func (f Failure) String() string { return string(f.ErrorCode) + ": " + f.Message }

func (ExecOutcome) Kind() OutcomeKind      { return OutcomeExec }
func (ReadOutcome) Kind() OutcomeKind      { return OutcomeRead }
func (StatOutcome) Kind() OutcomeKind      { return OutcomeStat }
func (WriteOutcome) Kind() OutcomeKind     { return OutcomeWrite }
func (VoidOutcome) Kind() OutcomeKind      { return OutcomeVoid }
func (CancelledOutcome) Kind() OutcomeKind { return OutcomeCancelled }
func (Failure) Kind() OutcomeKind          { return "" }

func (ExecOutcome) OK() bool      { return true }
func (ReadOutcome) OK() bool      { return true }
func (StatOutcome) OK() bool      { return true }
func (WriteOutcome) OK() bool     { return true }
func (VoidOutcome) OK() bool      { return true }
func (CancelledOutcome) OK() bool { return true }
func (Failure) OK() bool          { return false }

func (ExecOutcome) isOutcome()      {}
func (ReadOutcome) isOutcome()      {}
func (StatOutcome) isOutcome()      {}
func (WriteOutcome) isOutcome()     {}
func (VoidOutcome) isOutcome()      {}
func (CancelledOutcome) isOutcome() {}
func (Failure) isOutcome()          {}

// okHeader leads every success arm on the wire.
type okHeader struct {
	OK   bool        `json:"ok"`
	Kind OutcomeKind `json:"kind"`
}

func (o ExecOutcome) MarshalJSON() ([]byte, error) {
	type wire ExecOutcome
	return json.Marshal(struct {
		okHeader
		wire
	}{okHeader{true, OutcomeExec}, wire(o)})
}

func (o ReadOutcome) MarshalJSON() ([]byte, error) {
	return json.Marshal(okHeader{true, OutcomeRead})
}

func (o StatOutcome) MarshalJSON() ([]byte, error) {
	type wire StatOutcome
	return json.Marshal(struct {
		okHeader
		wire
	}{okHeader{true, OutcomeStat}, wire(o)})
}

func (o WriteOutcome) MarshalJSON() ([]byte, error) {
	if o.CanonicalPath == "" {
		return nil, fmt.Errorf("protocol: a write outcome requires canonicalPath")
	}
	type wire WriteOutcome
	return json.Marshal(struct {
		okHeader
		wire
	}{okHeader{true, OutcomeWrite}, wire(o)})
}

func (o VoidOutcome) MarshalJSON() ([]byte, error) {
	return json.Marshal(okHeader{true, OutcomeVoid})
}

func (o CancelledOutcome) MarshalJSON() ([]byte, error) {
	if !o.State.Valid() {
		return nil, &UnknownMemberError{Set: cancelStates.name, Value: string(o.State)}
	}
	type wire CancelledOutcome
	return json.Marshal(struct {
		okHeader
		wire
	}{okHeader{true, OutcomeCancelled}, wire(o)})
}

func (o Failure) MarshalJSON() ([]byte, error) {
	if !o.ErrorCode.Valid() {
		return nil, &UnknownMemberError{Set: errorCodes.name, Value: string(o.ErrorCode)}
	}
	type wire Failure
	return json.Marshal(struct {
		OK bool `json:"ok"`
		wire
	}{false, wire(o)})
}
