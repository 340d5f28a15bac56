package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The lane's hash chains (docs/audit.md, "The chain"): every row of a
// chained table carries its place in its chain (seq, from 1), the digest of
// the row before (prev) and its own digest, which covers prev and the row's
// canonical bytes. An edit, a deletion or a reordering of rows then shows
// as a row whose digest, prev or seq does not follow.
//
// The canonical bytes of a row are its fields as netstrings, in a fixed
// order: first the chain's name, the row's seq and its time in Unix
// milliseconds, then the row's own fields in the order its chain documents.
// A netstring is the field's length in bytes in decimal, ':', the bytes,
// ',': "5:audit,". Integers are written in decimal, strings as their UTF-8
// bytes, an absent field as the empty string ("0:,").
//
//	digest = hex(SHA-256(prev || canonical bytes))
//
// where prev is the row before's digest as its 64 lower-case hex
// characters, and ChainGenesis for the first row of a chain.

// ChainGenesis is the prev of a chain's first row: 64 zeros.
const ChainGenesis = "0000000000000000000000000000000000000000000000000000000000000000"

// The lane's chains: the audit trail's and the instruction history's.
const (
	ChainAudit   = "audit"
	ChainHistory = "history"
)

// Chains are the lane's chains, in the order `sema audit verify` checks
// them.
var Chains = []string{ChainAudit, ChainHistory}

// ChainCanonical is a row's canonical bytes: the chain, seq and time, then
// fields, each as a netstring.
func ChainCanonical(chain string, seq, atMs int64, fields ...string) []byte {
	var b []byte
	put := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
		b = append(b, ',')
	}
	put(chain)
	put(strconv.FormatInt(seq, 10))
	put(strconv.FormatInt(atMs, 10))
	for _, f := range fields {
		put(f)
	}
	return b
}

// ChainDigest is a row's digest: SHA-256 over the digest of the row before
// (its hex text) and the row's canonical bytes, in lower-case hex.
func ChainDigest(prev string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// ValidChainDigest reports whether s is a digest as ChainDigest writes it.
func ValidChainDigest(s string) bool {
	if len(s) != 2*sha256.Size || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// AuditCanonical is an audit row's canonical bytes. Its own fields, in
// order: identityId, deviceId, event, reason, remoteAddr, count.
func AuditCanonical(seq, atMs int64, identityID, deviceID, event, reason, remoteAddr string, count int) []byte {
	return ChainCanonical(ChainAudit, seq, atMs, identityID, deviceID, event, reason, remoteAddr, strconv.Itoa(count))
}

// HistoryCanonical is an instruction history row's canonical bytes. Its
// own fields, in order: instructionId, identityId, apiKeyId, deviceId,
// rootSessionId, replica, remoteAddr, kind, summary, receivedMs,
// dispatchedMs, settledMs, outcome, exitCode, stdoutBytes, stderrBytes,
// dataBytes, truncatedStdout, truncatedStderr; times in Unix milliseconds,
// dispatchedMs and exitCode empty when absent, the truncation flags 1 or 0.
func HistoryCanonical(seq, atMs int64, r InstructionRecordFields) []byte {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	optional := func(n *int64) string {
		if n == nil {
			return ""
		}
		return strconv.FormatInt(*n, 10)
	}
	return ChainCanonical(ChainHistory, seq, atMs, r.InstructionID, r.IdentityID, r.APIKeyID, r.DeviceID,
		r.RootSessionID, r.Replica, r.RemoteAddr, r.Kind, r.Summary, strconv.FormatInt(r.ReceivedMs, 10),
		optional(r.DispatchedMs), strconv.FormatInt(r.SettledMs, 10), r.Outcome, optional(r.ExitCode),
		strconv.FormatInt(r.StdoutBytes, 10), strconv.FormatInt(r.StderrBytes, 10), strconv.FormatInt(r.DataBytes, 10),
		flag(r.TruncatedStdout), flag(r.TruncatedStderr))
}

// InstructionRecordFields are the fields of a history row its digest
// covers (HistoryCanonical).
type InstructionRecordFields struct {
	InstructionID, IdentityID, APIKeyID, DeviceID, RootSessionID, Replica, RemoteAddr string
	Kind, Summary, Outcome                                                            string
	ReceivedMs, SettledMs                                                             int64
	DispatchedMs, ExitCode                                                            *int64
	StdoutBytes, StderrBytes, DataBytes                                               int64
	TruncatedStdout, TruncatedStderr                                                  bool
}

// AuditEntry is one row of the audit trail as GET /v1/audit and `sema audit
// export` give it; the field names are stable (docs/api.md). A row written
// before the trail was chained has seq 0 and no prev or digest.
type AuditEntry struct {
	Seq        int64  `json:"seq"`
	At         string `json:"at"` // RFC 3339, UTC, milliseconds (WireTime)
	Event      string `json:"event"`
	IdentityID string `json:"identityId,omitempty"`
	DeviceID   string `json:"deviceId,omitempty"`
	Reason     string `json:"reason,omitempty"`
	RemoteAddr string `json:"remoteAddr,omitempty"`
	Count      int    `json:"count"`
	Prev       string `json:"prev,omitempty"`
	Digest     string `json:"digest,omitempty"`
}

// Canonical is the entry's canonical bytes, from its fields as exported:
// anyone holding an export can recompute every digest.
func (e AuditEntry) Canonical() ([]byte, error) {
	at, err := time.Parse(time.RFC3339Nano, e.At)
	if err != nil {
		return nil, fmt.Errorf("audit row %d: at %q is not an RFC 3339 time", e.Seq, e.At)
	}
	return AuditCanonical(e.Seq, at.UnixMilli(), e.IdentityID, e.DeviceID, e.Event, e.Reason, e.RemoteAddr, e.Count), nil
}

// GET /v1/audit is paged: ?limit= rows at most (DefaultAuditPage when
// absent).
const (
	DefaultAuditPage = 500
	MaxAuditPage     = 1000
)

// AuditPage is the answer of GET /v1/audit: rows oldest first. Entries is
// never null. Next is always present: the cursor to pass as ?cursor= for
// the rows after these, also once the trail's end is reached (a follower
// polls with it); More says whether more rows were already there.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next"`
	More    bool         `json:"more"`
}

// ChainHead is a place in a chain: the seq and digest of one of its rows
// (the last one, for a head; seq 0 with ChainGenesis before any). Its text
// form, a checkpoint, is chain:seq:digest.
type ChainHead struct {
	Chain  string `json:"chain"`
	Seq    int64  `json:"seq"`
	Digest string `json:"digest"`
	At     string `json:"at,omitempty"` // the row's time, when known
}

// String is the head as a checkpoint: chain:seq:digest.
func (h ChainHead) String() string { return fmt.Sprintf("%s:%d:%s", h.Chain, h.Seq, h.Digest) }

// ParseCheckpoint reads a checkpoint (ChainHead.String).
func ParseCheckpoint(s string) (ChainHead, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 || parts[0] == "" {
		return ChainHead{}, fmt.Errorf("a checkpoint is chain:seq:digest (as `sema audit checkpoint` prints it)")
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq < 0 {
		return ChainHead{}, fmt.Errorf("a checkpoint's seq is a number from 0")
	}
	if !ValidChainDigest(parts[2]) {
		return ChainHead{}, fmt.Errorf("a checkpoint's digest is 64 lower-case hex characters")
	}
	return ChainHead{Chain: parts[0], Seq: seq, Digest: parts[2]}, nil
}

// AuditVerifyRequest is the body of POST /v1/audit/verify: from, when not
// "", is a checkpoint the chain must pass through, and where verifying
// starts; "" starts at the oldest kept row of Chain (ChainAudit when "").
type AuditVerifyRequest struct {
	From  string `json:"from,omitempty"`
	Chain string `json:"chain,omitempty"`
}

// ChainVerification is the answer of POST /v1/audit/verify. OK is false
// when a row does not match: Problem names the first. Rows counts the rows
// checked, from From (exclusive: the checkpoint or the chain's anchor) to
// Head.
type ChainVerification struct {
	OK      bool          `json:"ok"`
	Rows    int64         `json:"rows"`
	From    ChainHead     `json:"from"`
	Head    ChainHead     `json:"head"`
	Problem *ChainProblem `json:"problem,omitempty"`
}

// ChainProblem is the first row of a chain that does not match.
type ChainProblem struct {
	Seq int64  `json:"seq"`
	Why string `json:"why"`
}
