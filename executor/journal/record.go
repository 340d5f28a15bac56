package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Events of a record.
const (
	// EventStart: an instruction's op is about to begin (before its
	// approval, if any), so that a crash mid-command still leaves a trace.
	EventStart = "start"
	// EventEnd: the instruction's one result was produced.
	EventEnd = "end"
	// EventRotated: the first record of a file that follows a rotated one;
	// its prev is the last digest of that file, so the chain goes on.
	EventRotated = "rotated"
)

// Record is one line of the journal: a JSON object. Fields are in the
// order they are hashed (Canonical).
type Record struct {
	Seq           int64     `json:"seq"`
	Time          time.Time `json:"time"`
	Event         string    `json:"event"`
	InstructionID string    `json:"instructionId,omitempty"`
	Kind          string    `json:"kind,omitempty"`
	Summary       string    `json:"summary,omitempty"`
	// Approval is the approval device's decision when the executor runs
	// with --approve: allowed, or refused (denied, expired, no device).
	Approval string `json:"approval,omitempty"`
	// Outcome is ok, cancelled:<state>, or the failure's errorCode.
	Outcome  string `json:"outcome,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Stdout   int64  `json:"stdoutBytes,omitempty"`
	Stderr   int64  `json:"stderrBytes,omitempty"`
	Data     int64  `json:"dataBytes,omitempty"`
	// Truncated: some output was cut (the executor's cap, §4).
	Truncated bool `json:"truncated,omitempty"`
	// Prev is the digest of the record before, "" for the very first.
	Prev   string `json:"prev"`
	Digest string `json:"digest"`
}

// domain separates this chain's digests from any other use of SHA-256.
const domain = "sema.journal.v1\n"

// Canonical is the bytes a record's digest covers: its JSON encoding with
// the digest left out and the time in UTC, fields in declaration order.
func Canonical(r Record) []byte {
	r.Digest = ""
	r.Time = r.Time.UTC()
	b, err := json.Marshal(struct {
		Record
		Digest string `json:"digest,omitempty"` // shadows Record.Digest: left out when empty
	}{Record: r})
	if err != nil {
		panic(err) // a Record always encodes
	}
	return b
}

// Digest is the record's digest: SHA-256 over the domain and its canonical
// bytes, which include Prev: each record's digest covers the one before.
func Digest(r Record) string {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write(Canonical(r))
	return hex.EncodeToString(h.Sum(nil))
}
