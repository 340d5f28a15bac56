package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// historyQueryKeys is the closed set of GET /v1/instructions' query.
var historyQueryKeys = []string{"device", "session", "outcome", "since", "until", "cursor", "identity", "limit"}

// historyQuery is a parsed GET /v1/instructions query.
type historyQuery struct {
	filter   store.HistoryFilter // Limit is limit+1: one row past the page tells whether one follows
	limit    int
	identity string // identity=, "" when absent
}

// parseHistoryQuery reads GET /v1/instructions' query: each key at most
// once, no other key; errors name the key and never echo a value.
func parseHistoryQuery(raw string) (historyQuery, *apiError) {
	q := historyQuery{limit: api.DefaultInstructionPage}
	field := func(format string, args ...any) (historyQuery, *apiError) {
		return q, errorf(http.StatusBadRequest, api.CodeFieldInvalid, format, args...)
	}
	values, aerr := closedQuery(raw, historyQueryKeys, "the instruction history")
	if aerr != nil {
		return q, aerr
	}
	get := func(key string) (string, bool) {
		v, ok := values[key]
		if !ok {
			return "", false
		}
		return v[0], true
	}
	if v, ok := get("limit"); ok {
		n, err := parsePositive(v)
		if err != nil || n > api.MaxInstructionPage {
			return field("limit must be an integer from 1 to %d", api.MaxInstructionPage)
		}
		q.limit = int(n)
	}
	if v, ok := get("device"); ok {
		if !validDeviceID(v) {
			return field("device must be a device id (dev_…)")
		}
		q.filter.DeviceID = v
	}
	if v, ok := get("session"); ok {
		if problem := lane.CheckRootSessionID(v); problem != "" || v == "" {
			return field("session must be a root session id: it %s", cmp(problem, "must not be empty"))
		}
		q.filter.RootSessionID = v
	}
	if v, ok := get("outcome"); ok {
		if !validOutcomeLabel(v) {
			return field("outcome must be ok, cancelled:<state> or an errorCode (such as outcome_unknown)")
		}
		q.filter.Outcome = v
	}
	for _, t := range []struct {
		key string
		dst *time.Time
	}{{"since", &q.filter.Since}, {"until", &q.filter.Until}} {
		if v, ok := get(t.key); ok {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || at.Year() < 1970 || at.Year() > 9999 {
				return field("%s must be an RFC 3339 time, such as 2026-12-01T08:00:00Z", t.key)
			}
			*t.dst = at
		}
	}
	if v, ok := get("cursor"); ok {
		seq, ok := parseHistoryCursor(v)
		if !ok {
			return field("cursor must be the next or cursor of an earlier answer")
		}
		q.filter.After = seq
	}
	if v, ok := get("identity"); ok {
		if !validIdentityID(v) {
			return field("identity must be an identity id (idn_…)")
		}
		q.identity = v
	}
	q.filter.Limit = q.limit + 1
	return q, nil
}

// cmp is a unless it is empty, else b.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// validOutcomeLabel: ok, cancelled:<a cancel state>, or an errorCode
// (protocol.OutcomeLabel's words).
func validOutcomeLabel(v string) bool {
	if state, ok := strings.CutPrefix(v, "cancelled:"); ok {
		return protocol.CancelState(state).Valid()
	}
	return v == "ok" || protocol.ErrorCode(v).Valid()
}

func validIdentityID(s string) bool {
	u, ok := strings.CutPrefix(s, ids.Identity)
	return ok && protocol.ValidULID(u)
}

// historyCursorPrefix marks a history cursor inside its encoding, so that
// another page's cursor is not taken for one.
const historyCursorPrefix = "h1:"

// historyCursor is the opaque cursor after the row of seq.
func historyCursor(seq int64) string { return pageCursor(historyCursorPrefix, seq) }

// parseHistoryCursor reads a cursor historyCursor made.
func parseHistoryCursor(c string) (int64, bool) { return parsePageCursor(historyCursorPrefix, c) }

// listInstructions is GET /v1/instructions: the caller's own history, or,
// for the admin, any identity's (identity= to choose one). Rows are in the
// registry every replica shares, so any replica answers.
func (s *API) listInstructions(w http.ResponseWriter, r *http.Request) {
	q, aerr := parseHistoryQuery(r.URL.RawQuery)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	caller := callerOf(r.Context())
	switch {
	case caller.Admin:
		q.filter.IdentityID = q.identity
	case q.identity != "" && q.identity != caller.ID:
		writeError(w, errorf(http.StatusForbidden, api.CodeForbidden, "only the admin reads another identity's history"))
		return
	default:
		q.filter.IdentityID = caller.ID
	}
	rows, err := s.store.History(r.Context(), q.filter)
	if err != nil {
		s.unavailable(w, r, "read history", err)
		return
	}
	page := api.InstructionList{Instructions: make([]api.InstructionRecord, 0, min(len(rows), q.limit)), Cursor: historyCursor(q.filter.After)}
	for i, row := range rows {
		if i == q.limit {
			page.Next = page.Cursor
			break
		}
		page.Instructions = append(page.Instructions, instructionRecord(row))
		page.Cursor = historyCursor(row.Seq)
	}
	writeJSON(w, http.StatusOK, page)
}

// getInstruction is GET /v1/instructions/{id}: one row of the caller's
// history (any identity's for the admin); another identity's row is 404,
// as an unknown one.
func (s *API) getInstruction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	caller := callerOf(r.Context())
	row, err := s.store.HistoryRow(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && !caller.Admin && row.IdentityID != caller.ID):
		writeError(w, errorf(http.StatusNotFound, api.CodeInstructionNotFound, "no instruction %q of yours is in the lane's history", clip(id)))
		return
	case err != nil:
		s.unavailable(w, r, "read history row", err)
		return
	}
	writeJSON(w, http.StatusOK, instructionRecord(row))
}

// instructionRecord is a history row as the API shows it.
func instructionRecord(r store.HistoryRow) api.InstructionRecord {
	v := api.InstructionRecord{
		Seq: r.Seq, InstructionID: r.InstructionID, IdentityID: r.IdentityID, APIKeyID: r.APIKeyID, DeviceID: r.DeviceID,
		RootSessionID: r.RootSessionID, Replica: r.Replica, RemoteAddr: r.RemoteAddr, Kind: r.Kind, Summary: r.Summary,
		ReceivedAt: api.WireTime(r.ReceivedAt), SettledAt: api.WireTime(r.SettledAt), Outcome: r.Outcome, ExitCode: r.ExitCode,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes, DataBytes: r.DataBytes,
		TruncatedStdout: r.TruncatedStdout, TruncatedStderr: r.TruncatedStderr, At: api.WireTime(r.At), PrevDigest: r.PrevDigest, Digest: r.Digest,
	}
	if r.DispatchedAt != nil {
		v.DispatchedAt = api.WireTime(*r.DispatchedAt)
	}
	return v
}
