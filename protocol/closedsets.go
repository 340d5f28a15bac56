package protocol

import (
	"fmt"
	"slices"
)

// Every table of the spec marked <!-- closed-set: NAME --> is a closed set: a
// typed constant per member, a function listing all members (a fresh slice),
// and a Parse function whose default is an error. Values outside a set are
// never accepted, and sets_test.go checks each list against the spec's table.

// UnknownMemberError reports a value outside one of the spec's closed sets.
type UnknownMemberError struct {
	Set   string // the spec's name for the set, e.g. "DEVICE_CHUNK_KINDS"
	Value string // the refused value
}

func (e *UnknownMemberError) Error() string {
	return fmt.Sprintf("protocol: %q is not a member of %s", e.Value, e.Set)
}

// closedSet holds the members of one closed set in the spec's order.
type closedSet[T ~string] struct {
	name    string
	members []T
}

func (c closedSet[T]) all() []T { return slices.Clone(c.members) }

func (c closedSet[T]) has(v T) bool { return slices.Contains(c.members, v) }

func (c closedSet[T]) parse(s string) (T, error) {
	if c.has(T(s)) {
		return T(s), nil
	}
	return "", &UnknownMemberError{Set: c.name, Value: s}
}

// HelloRejectCode is a helloReject code (§1.4, DEVICE_HELLO_REJECT_CODES).
type HelloRejectCode string

const (
	// RejectAuthFailed is deliberately ambiguous: unknown or malformed device
	// id, malformed epoch, bad signature, or an unreachable registry.
	RejectAuthFailed HelloRejectCode = "auth_failed"
	// RejectRevoked is terminal: the device has been revoked.
	RejectRevoked HelloRejectCode = "revoked"
	// RejectProtocolVersionUnsupported carries minProtocolVersion.
	RejectProtocolVersionUnsupported HelloRejectCode = "protocol_version_unsupported"
	// RejectDraining: the replica takes no new connections.
	RejectDraining HelloRejectCode = "draining"
	// RejectAlreadyConnected: the connection lease is not available now.
	RejectAlreadyConnected HelloRejectCode = "already_connected"
)

var helloRejectCodes = closedSet[HelloRejectCode]{"DEVICE_HELLO_REJECT_CODES", []HelloRejectCode{
	RejectAuthFailed, RejectRevoked, RejectProtocolVersionUnsupported, RejectDraining, RejectAlreadyConnected,
}}

// HelloRejectCodes lists every helloReject code.
func HelloRejectCodes() []HelloRejectCode { return helloRejectCodes.all() }

// ParseHelloRejectCode refuses anything outside DEVICE_HELLO_REJECT_CODES.
func ParseHelloRejectCode(s string) (HelloRejectCode, error) { return helloRejectCodes.parse(s) }

// Valid reports whether c is a member of DEVICE_HELLO_REJECT_CODES.
func (c HelloRejectCode) Valid() bool { return helloRejectCodes.has(c) }

// DeviceFrameType is the t of a device→server frame (§2.2, DEVICE_FRAME_TYPES).
type DeviceFrameType string

const (
	TypeHello         DeviceFrameType = "hello"
	TypeGenerationAck DeviceFrameType = "generationAck"
	TypeHeartbeat     DeviceFrameType = "heartbeat"
	TypeResult        DeviceFrameType = "result"
	TypeChunk         DeviceFrameType = "chunk"
	TypeGoodbye       DeviceFrameType = "goodbye"
)

var deviceFrameTypes = closedSet[DeviceFrameType]{"DEVICE_FRAME_TYPES", []DeviceFrameType{
	TypeHello, TypeGenerationAck, TypeHeartbeat, TypeResult, TypeChunk, TypeGoodbye,
}}

// DeviceFrameTypes lists every device→server frame type.
func DeviceFrameTypes() []DeviceFrameType { return deviceFrameTypes.all() }

// ParseDeviceFrameType refuses anything outside DEVICE_FRAME_TYPES.
func ParseDeviceFrameType(s string) (DeviceFrameType, error) { return deviceFrameTypes.parse(s) }

// Valid reports whether t is a member of DEVICE_FRAME_TYPES.
func (t DeviceFrameType) Valid() bool { return deviceFrameTypes.has(t) }

// ServerFrameType is the t of a server→device frame (§2.3, DEVICE_SERVER_FRAME_TYPES).
type ServerFrameType string

const (
	TypeChallenge   ServerFrameType = "challenge"
	TypeHelloAck    ServerFrameType = "helloAck"
	TypeHelloReject ServerFrameType = "helloReject"
	TypeInstruction ServerFrameType = "instruction"
	TypePayload     ServerFrameType = "payload"
	TypeCancel      ServerFrameType = "cancel"
	TypeResultAck   ServerFrameType = "resultAck"
	TypeChunkAck    ServerFrameType = "chunkAck"
	TypeBye         ServerFrameType = "bye"
	// TypePing is declared but never sent today (§8): accept and ignore it.
	TypePing ServerFrameType = "ping"
)

var serverFrameTypes = closedSet[ServerFrameType]{"DEVICE_SERVER_FRAME_TYPES", []ServerFrameType{
	TypeChallenge, TypeHelloAck, TypeHelloReject, TypeInstruction, TypePayload,
	TypeCancel, TypeResultAck, TypeChunkAck, TypeBye, TypePing,
}}

// ServerFrameTypes lists every server→device frame type.
func ServerFrameTypes() []ServerFrameType { return serverFrameTypes.all() }

// ParseServerFrameType refuses anything outside DEVICE_SERVER_FRAME_TYPES.
func ParseServerFrameType(s string) (ServerFrameType, error) { return serverFrameTypes.parse(s) }

// Valid reports whether t is a member of DEVICE_SERVER_FRAME_TYPES.
func (t ServerFrameType) Valid() bool { return serverFrameTypes.has(t) }

// FrameRejectReason is a stage-1 (parsing) refusal (§2.4, DEVICE_FRAME_REJECT_REASONS).
type FrameRejectReason string

const (
	// ReasonFrameTooLarge: over the cap that applies to this phase.
	ReasonFrameTooLarge FrameRejectReason = "frame_too_large"
	// ReasonNotJSON: not valid JSON, and every binary WebSocket frame.
	ReasonNotJSON FrameRejectReason = "not_json"
	// ReasonNotObject: valid JSON, but not a top-level object.
	ReasonNotObject FrameRejectReason = "not_object"
	// ReasonUnknownType: no string t, or a t outside the frame set.
	ReasonUnknownType FrameRejectReason = "unknown_type"
	// ReasonBadShape: a field missing, mistyped, out of range or non-canonical.
	ReasonBadShape FrameRejectReason = "bad_shape"
)

var frameRejectReasons = closedSet[FrameRejectReason]{"DEVICE_FRAME_REJECT_REASONS", []FrameRejectReason{
	ReasonFrameTooLarge, ReasonNotJSON, ReasonNotObject, ReasonUnknownType, ReasonBadShape,
}}

// FrameRejectReasons lists every stage-1 reject reason.
func FrameRejectReasons() []FrameRejectReason { return frameRejectReasons.all() }

// ParseFrameRejectReason refuses anything outside DEVICE_FRAME_REJECT_REASONS.
func ParseFrameRejectReason(s string) (FrameRejectReason, error) { return frameRejectReasons.parse(s) }

// Valid reports whether r is a member of DEVICE_FRAME_REJECT_REASONS.
func (r FrameRejectReason) Valid() bool { return frameRejectReasons.has(r) }

// GateRejectReason is a stage-2 (admission) refusal (§2.4, DEVICE_FRAME_GATE_REJECT_REASONS).
type GateRejectReason string

const (
	GatePreHello                GateRejectReason = "pre_hello"
	GateGenerationMismatch      GateRejectReason = "generation_mismatch"
	GateUnknownInstruction      GateRejectReason = "unknown_instruction"
	GateInstructionNotCommitted GateRejectReason = "instruction_not_committed"
	GateDeviceMismatch          GateRejectReason = "device_mismatch"
)

var gateRejectReasons = closedSet[GateRejectReason]{"DEVICE_FRAME_GATE_REJECT_REASONS", []GateRejectReason{
	GatePreHello, GateGenerationMismatch, GateUnknownInstruction, GateInstructionNotCommitted, GateDeviceMismatch,
}}

// GateRejectReasons lists every stage-2 reject reason.
func GateRejectReasons() []GateRejectReason { return gateRejectReasons.all() }

// ParseGateRejectReason refuses anything outside DEVICE_FRAME_GATE_REJECT_REASONS.
func ParseGateRejectReason(s string) (GateRejectReason, error) { return gateRejectReasons.parse(s) }

// Valid reports whether r is a member of DEVICE_FRAME_GATE_REJECT_REASONS.
func (r GateRejectReason) Valid() bool { return gateRejectReasons.has(r) }

// InstructionKind is the kind of an instruction (§3.1, DEVICE_INSTRUCTION_KINDS).
// A decoded instruction may carry a kind outside the set (the executor answers
// it not_supported); Valid tells.
type InstructionKind string

const (
	KindExec               InstructionKind = "exec"
	KindExecStream         InstructionKind = "execStream"
	KindReadTextFile       InstructionKind = "readTextFile"
	KindReadTextLines      InstructionKind = "readTextLines"
	KindReadBinaryFile     InstructionKind = "readBinaryFile"
	KindWriteFile          InstructionKind = "writeFile"
	KindWriteFileExclusive InstructionKind = "writeFileExclusive" // optional, presence-typed face
	KindWriteFileGuarded   InstructionKind = "writeFileGuarded"   // optional, presence-typed face
	KindAppendFile         InstructionKind = "appendFile"
	KindFileInfo           InstructionKind = "fileInfo"
	KindListDir            InstructionKind = "listDir"
	KindCanonicalPath      InstructionKind = "canonicalPath"
	KindExists             InstructionKind = "exists"
	KindReadLink           InstructionKind = "readLink" // optional, presence-typed face
	KindCreateDir          InstructionKind = "createDir"
	KindRemove             InstructionKind = "remove"
	KindCreateTempDir      InstructionKind = "createTempDir"
	KindCreateTempFile     InstructionKind = "createTempFile"
	KindStatBatch          InstructionKind = "statBatch" // declared, never dispatched today (§8)
)

var instructionKinds = closedSet[InstructionKind]{"DEVICE_INSTRUCTION_KINDS", []InstructionKind{
	KindExec, KindExecStream, KindReadTextFile, KindReadTextLines, KindReadBinaryFile,
	KindWriteFile, KindWriteFileExclusive, KindWriteFileGuarded, KindAppendFile,
	KindFileInfo, KindListDir, KindCanonicalPath, KindExists, KindReadLink,
	KindCreateDir, KindRemove, KindCreateTempDir, KindCreateTempFile, KindStatBatch,
}}

// InstructionKinds lists every instruction kind.
func InstructionKinds() []InstructionKind { return instructionKinds.all() }

// ParseInstructionKind refuses anything outside DEVICE_INSTRUCTION_KINDS.
func ParseInstructionKind(s string) (InstructionKind, error) { return instructionKinds.parse(s) }

// Valid reports whether k is a member of DEVICE_INSTRUCTION_KINDS.
func (k InstructionKind) Valid() bool { return instructionKinds.has(k) }

// IsWrite reports whether k is a write-family kind, whose content follows the
// instruction as a payload sub-sequence (§3.4).
func (k InstructionKind) IsWrite() bool {
	switch k {
	case KindWriteFile, KindWriteFileExclusive, KindWriteFileGuarded, KindAppendFile:
		return true
	}
	return false
}

// IsExec reports whether k runs a command and owes an exit chunk (§4).
func (k InstructionKind) IsExec() bool { return k == KindExec || k == KindExecStream }

// ErrorCode is the errorCode of a failure outcome (§3.3, DEVICE_OUTCOME_ERROR_CODES).
type ErrorCode string

const (
	ErrAborted            ErrorCode = "aborted"
	ErrAlreadyExists      ErrorCode = "already_exists"
	ErrAuthFailed         ErrorCode = "auth_failed"
	ErrCallbackError      ErrorCode = "callback_error"
	ErrInvalid            ErrorCode = "invalid"
	ErrIsDirectory        ErrorCode = "is_directory"
	ErrNotDirectory       ErrorCode = "not_directory"
	ErrNotFound           ErrorCode = "not_found"
	ErrNotSupported       ErrorCode = "not_supported"
	ErrOutcomeUnknown     ErrorCode = "outcome_unknown" // never auto-retried anywhere
	ErrPermissionDenied   ErrorCode = "permission_denied"
	ErrPreconditionFailed ErrorCode = "precondition_failed"
	ErrShellUnavailable   ErrorCode = "shell_unavailable" // the command never started
	ErrSpawnError         ErrorCode = "spawn_error"
	ErrSuspended          ErrorCode = "suspended"
	ErrTargetUnavailable  ErrorCode = "target_unavailable" // the work never started
	ErrTimeout            ErrorCode = "timeout"            // retryable: only when the work is known dead
	ErrTransportLost      ErrorCode = "transport_lost"
	ErrUnknown            ErrorCode = "unknown"
)

var errorCodes = closedSet[ErrorCode]{"DEVICE_OUTCOME_ERROR_CODES", []ErrorCode{
	ErrAborted, ErrAlreadyExists, ErrAuthFailed, ErrCallbackError, ErrInvalid, ErrIsDirectory,
	ErrNotDirectory, ErrNotFound, ErrNotSupported, ErrOutcomeUnknown, ErrPermissionDenied,
	ErrPreconditionFailed, ErrShellUnavailable, ErrSpawnError, ErrSuspended, ErrTargetUnavailable,
	ErrTimeout, ErrTransportLost, ErrUnknown,
}}

// ErrorCodes lists every outcome error code.
func ErrorCodes() []ErrorCode { return errorCodes.all() }

// ParseErrorCode refuses anything outside DEVICE_OUTCOME_ERROR_CODES.
func ParseErrorCode(s string) (ErrorCode, error) { return errorCodes.parse(s) }

// Valid reports whether c is a member of DEVICE_OUTCOME_ERROR_CODES.
func (c ErrorCode) Valid() bool { return errorCodes.has(c) }

// InstructionState is a lane-side instruction state (§5.1, DEVICE_INSTRUCTION_STATES).
type InstructionState string

const (
	// StateQueued: accepted, not yet past the commit; the device never saw it.
	StateQueued InstructionState = "queued"
	// StateDispatchCommitted: the commit was crossed; the only state in which
	// a result is accepted.
	StateDispatchCommitted InstructionState = "dispatch_committed"
	// StateTerminal: settled.
	StateTerminal InstructionState = "terminal"
	// StateTerminalNeverStarted: rejected before the commit; safe to retry.
	StateTerminalNeverStarted InstructionState = "terminal_never_started"
)

var instructionStates = closedSet[InstructionState]{"DEVICE_INSTRUCTION_STATES", []InstructionState{
	StateQueued, StateDispatchCommitted, StateTerminal, StateTerminalNeverStarted,
}}

// InstructionStates lists every instruction state.
func InstructionStates() []InstructionState { return instructionStates.all() }

// ParseInstructionState refuses anything outside DEVICE_INSTRUCTION_STATES.
func ParseInstructionState(s string) (InstructionState, error) { return instructionStates.parse(s) }

// Valid reports whether s is a member of DEVICE_INSTRUCTION_STATES.
func (s InstructionState) Valid() bool { return instructionStates.has(s) }

// ChunkKind is the kind of a chunk frame (§4, DEVICE_CHUNK_KINDS).
type ChunkKind string

const (
	ChunkStdout ChunkKind = "stdout" // carries dataB64, never exitCode
	ChunkStderr ChunkKind = "stderr" // carries dataB64, never exitCode
	ChunkData   ChunkKind = "data"   // read-family content; carries dataB64, never exitCode
	ChunkExit   ChunkKind = "exit"   // carries exitCode, never dataB64; exactly one, last
)

var chunkKinds = closedSet[ChunkKind]{"DEVICE_CHUNK_KINDS", []ChunkKind{
	ChunkStdout, ChunkStderr, ChunkData, ChunkExit,
}}

// ChunkKinds lists every chunk kind.
func ChunkKinds() []ChunkKind { return chunkKinds.all() }

// ParseChunkKind refuses anything outside DEVICE_CHUNK_KINDS.
func ParseChunkKind(s string) (ChunkKind, error) { return chunkKinds.parse(s) }

// Valid reports whether k is a member of DEVICE_CHUNK_KINDS.
func (k ChunkKind) Valid() bool { return chunkKinds.has(k) }

// ByeReason is the reason of a server bye (§5 R13, DEVICE_BYE_REASONS).
type ByeReason string

const (
	ByeRevoked    ByeReason = "revoked"    // terminal: stop, delete the key, re-enroll
	ByeDraining   ByeReason = "draining"   // reconnect with backoff
	ByeSuperseded ByeReason = "superseded" // another instance is live: stop
)

var byeReasons = closedSet[ByeReason]{"DEVICE_BYE_REASONS", []ByeReason{
	ByeRevoked, ByeDraining, ByeSuperseded,
}}

// ByeReasons lists every bye reason.
func ByeReasons() []ByeReason { return byeReasons.all() }

// ParseByeReason refuses anything outside DEVICE_BYE_REASONS.
func ParseByeReason(s string) (ByeReason, error) { return byeReasons.parse(s) }

// Valid reports whether r is a member of DEVICE_BYE_REASONS.
func (r ByeReason) Valid() bool { return byeReasons.has(r) }

// GoodbyeReason is the reason of a device goodbye (§5 R15, DEVICE_GOODBYE_REASONS).
type GoodbyeReason string

const (
	GoodbyeShutdown GoodbyeReason = "shutdown"  // the executor process is exiting
	GoodbyeSleep    GoodbyeReason = "sleep"     // suspending; expect to return with the same epoch
	GoodbyeUserStop GoodbyeReason = "user_stop" // the user stopped the executor
)

var goodbyeReasons = closedSet[GoodbyeReason]{"DEVICE_GOODBYE_REASONS", []GoodbyeReason{
	GoodbyeShutdown, GoodbyeSleep, GoodbyeUserStop,
}}

// GoodbyeReasons lists every goodbye reason.
func GoodbyeReasons() []GoodbyeReason { return goodbyeReasons.all() }

// ParseGoodbyeReason refuses anything outside DEVICE_GOODBYE_REASONS.
func ParseGoodbyeReason(s string) (GoodbyeReason, error) { return goodbyeReasons.parse(s) }

// Valid reports whether r is a member of DEVICE_GOODBYE_REASONS.
func (r GoodbyeReason) Valid() bool { return goodbyeReasons.has(r) }

// CancelState is the state of a cancelled outcome (§5.3, DEVICE_CANCEL_STATES).
type CancelState string

const (
	CancelNotStarted CancelState = "not_started" // nothing happened; safely retryable
	CancelKilled     CancelState = "killed"      // it ran and was killed; not retryable
)

var cancelStates = closedSet[CancelState]{"DEVICE_CANCEL_STATES", []CancelState{
	CancelNotStarted, CancelKilled,
}}

// CancelStates lists every cancel state.
func CancelStates() []CancelState { return cancelStates.all() }

// ParseCancelState refuses anything outside DEVICE_CANCEL_STATES.
func ParseCancelState(s string) (CancelState, error) { return cancelStates.parse(s) }

// Valid reports whether s is a member of DEVICE_CANCEL_STATES.
func (s CancelState) Valid() bool { return cancelStates.has(s) }
