package api

// InstructionRecord is one row of the lane's instruction history: one
// instruction the lane settled, written by the replica that held the
// device's connection. It never holds a file's content or a command's
// output: Summary is the command (or, on a lane run with
// --history-commands digest, its SHA-256 and length), paths and byte
// counts. The field names are stable (docs/api.md).
type InstructionRecord struct {
	// Seq orders the history: a row settled later has a higher seq.
	Seq           int64  `json:"seq"`
	InstructionID string `json:"instructionId"`
	IdentityID    string `json:"identityId,omitempty"`
	APIKeyID      string `json:"apiKeyId,omitempty"`
	DeviceID      string `json:"deviceId"`
	RootSessionID string `json:"rootSessionId,omitempty"`
	// Replica is the lane replica that held the device's connection;
	// absent on a lane that is one replica alone.
	Replica    string `json:"replica,omitempty"`
	RemoteAddr string `json:"remoteAddr,omitempty"`
	Kind       string `json:"kind"`
	Summary    string `json:"summary"`
	ReceivedAt string `json:"receivedAt"`
	// DispatchedAt is when the lane committed it to the device; absent
	// when it never reached the device (terminal_never_started).
	DispatchedAt string `json:"dispatchedAt,omitempty"`
	SettledAt    string `json:"settledAt"`
	// Outcome is ok, cancelled:<state> (§5.3), or the failure's
	// errorCode (outcome_unknown among them).
	Outcome         string `json:"outcome"`
	ExitCode        *int   `json:"exitCode,omitempty"` // an exec's
	StdoutBytes     int64  `json:"stdoutBytes"`
	StderrBytes     int64  `json:"stderrBytes"`
	DataBytes       int64  `json:"dataBytes"`
	TruncatedStdout bool   `json:"truncatedStdout"`
	TruncatedStderr bool   `json:"truncatedStderr"`
	// At is when the row was written, by the registry's clock; with Seq,
	// PrevDigest and Digest it places the row in the history's hash chain
	// (HistoryCanonical), which can be recomputed from these fields alone.
	At         string `json:"at"`
	PrevDigest string `json:"prevDigest"`
	Digest     string `json:"digest"`
}

// InstructionList is the answer of GET /v1/instructions: one page, oldest
// first. Instructions is never null. Next, when present, is the cursor of
// the next page (pass it as ?cursor=), absent when no row follows now.
// Cursor is where this page ends, always present: passed as ?cursor= later,
// it returns the rows settled since (a follower's poll).
type InstructionList struct {
	Instructions []InstructionRecord `json:"instructions"`
	Next         string              `json:"next,omitempty"`
	Cursor       string              `json:"cursor"`
}

// GET /v1/instructions is paged: ?limit= rows at most
// (DefaultInstructionPage when absent).
const (
	DefaultInstructionPage = 500
	MaxInstructionPage     = 1000
)

// InstructionsPath is the instruction history: GET it for a page, GET
// InstructionsPath/{id} for one row.
const InstructionsPath = "/v1/instructions"
