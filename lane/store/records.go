package store

import "time"

// The records the registry keeps of what happened: the audit trail, the
// instruction history, and the hash chains both are (docs/audit.md).

// AuditEvent is one row of the audit trail. It never holds a token, a key
// or content: only who, what, and a reason code.
type AuditEvent struct {
	ID         int64
	At         time.Time
	IdentityID string // "" when none
	DeviceID   string // "" when none
	Event      string // e.g. "device.enroll_refused"
	Reason     string // a reason code, e.g. "token_reuse"; "" when none
	RemoteAddr string // the address the request or socket came from; "" when none
	// Count is how many identical events the row stands for (identical
	// refusals from one address within a window are one row); 0 is written
	// as 1.
	Count int
	// Seq is the row's place in the audit chain, Prev the digest of the
	// row before and Digest its own (set by the store; docs/audit.md). A
	// row written before the trail was chained has Seq 0 and neither.
	Seq    int64
	Prev   string
	Digest string
}

// ChainHead is a place in a hash chain: the seq and digest of one row.
type ChainHead struct {
	Chain  string
	Seq    int64
	Digest string
	At     time.Time // the row's time; zero when unknown (no row yet, or pruned)
}

// ChainReport is what VerifyChain found: Rows rows checked after From (the
// checkpoint, or the chain's anchor) up to Head, and the first row that
// does not match, if any.
type ChainReport struct {
	From    ChainHead
	Head    ChainHead
	Rows    int64
	Problem *ChainProblem
}

// ChainProblem names the first row of a chain that does not match, and why.
type ChainProblem struct {
	Seq int64
	Why string
}

// AuditFilter selects audit rows; zero fields match everything.
type AuditFilter struct {
	IdentityID string
	DeviceID   string
	Event      string
	RemoteAddr string
	// Since, when not zero, selects the rows written at or after it.
	Since time.Time
	// AfterID, when not 0, selects the rows after the one with this ID.
	AfterID int64
	Limit   int // 0 means 1000
}

// HistoryRow is one settled instruction in the history. It never holds a
// file's content or a command's output: Summary is the command (or its
// digest), paths and byte counts (protocol.Summary).
type HistoryRow struct {
	// Seq orders the rows, assigned by RecordHistory; 0 before.
	Seq           int64
	InstructionID string
	IdentityID    string // "" for an in-process caller
	APIKeyID      string // "" when no key was used
	DeviceID      string
	RootSessionID string // "" when none
	Replica       string // the replica that held the device's connection; "" alone
	RemoteAddr    string // the caller's address; "" when none
	Kind          string
	Summary       string
	ReceivedAt    time.Time
	DispatchedAt  *time.Time // nil when it was never sent to the device
	SettledAt     time.Time
	// Outcome is ok, cancelled:<state>, or the failure's errorCode
	// (protocol.OutcomeLabel).
	Outcome         string
	ExitCode        *int // an exec's exit code; nil for other kinds and failures
	StdoutBytes     int64
	StderrBytes     int64
	DataBytes       int64
	TruncatedStdout bool
	TruncatedStderr bool
	// At, PrevDigest and Digest place the row in the history's hash chain
	// (docs/audit.md): when it was written, by the database clock, and its
	// links; set by RecordHistory.
	At         time.Time
	PrevDigest string
	Digest     string
}

// HistoryFilter selects history rows; zero fields match everything.
type HistoryFilter struct {
	IdentityID    string
	DeviceID      string
	RootSessionID string
	Outcome       string
	Since         time.Time // received at or after
	Until         time.Time // received before
	After         int64     // only rows with a higher Seq
	Limit         int       // 0 means 1000
}

// Errors.
