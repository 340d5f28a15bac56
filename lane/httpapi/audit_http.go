package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// The audit trail, readable and verifiable, by the admin only
// (docs/api.md, "The audit trail"; docs/audit.md).

// auditQueryKeys is the closed set of GET /v1/audit's query.
var auditQueryKeys = []string{"since", "event", "cursor", "limit"}

// maxEventBytes bounds the event filter: event names are short.
const maxEventBytes = 128

// auditQuery is a parsed GET /v1/audit query.
type auditQuery struct {
	since   time.Time
	event   string
	afterID int64
	limit   int
}

// parseAuditQuery reads since, event, cursor and limit: each at most once,
// no other key; errors name the key and never echo a value.
func parseAuditQuery(raw string) (auditQuery, *apiError) {
	q := auditQuery{limit: api.DefaultAuditPage}
	field := func(format string, args ...any) (auditQuery, *apiError) {
		return q, errorf(http.StatusBadRequest, api.CodeFieldInvalid, format, args...)
	}
	values, aerr := closedQuery(raw, auditQueryKeys, "the audit trail")
	if aerr != nil {
		return q, aerr
	}
	if v, ok := values["limit"]; ok {
		n, err := parsePositive(v[0])
		if err != nil || n > api.MaxAuditPage {
			return field("limit must be an integer from 1 to %d", api.MaxAuditPage)
		}
		q.limit = int(n)
	}
	if v, ok := values["since"]; ok {
		t, err := time.Parse(time.RFC3339Nano, v[0])
		if err != nil {
			return field("since must be an RFC 3339 time (2026-12-06T09:00:00Z)")
		}
		q.since = t
	}
	if v, ok := values["event"]; ok {
		if v[0] == "" || len(v[0]) > maxEventBytes {
			return field("event must be an event name of 1 to %d bytes", maxEventBytes)
		}
		q.event = v[0]
	}
	if v, ok := values["cursor"]; ok && v[0] != "" { // "" is the start
		id, ok := parseAuditCursor(v[0])
		if !ok {
			return field("cursor must be the next of an earlier answer")
		}
		q.afterID = id
	}
	return q, nil
}

// auditCursorPrefix marks an audit cursor: the opaque text is base64url of
// it and the last row's id.
const auditCursorPrefix = "audit."

func auditCursor(id int64) string { return pageCursor(auditCursorPrefix, id) }

func parseAuditCursor(s string) (int64, bool) { return parsePageCursor(auditCursorPrefix, s) }

// listAudit is GET /v1/audit: one page of the trail, oldest first. next is
// always given: where the rows after this page begin, also at the end of
// the trail (a follower polls with it).
func (s *API) listAudit(w http.ResponseWriter, r *http.Request) {
	q, aerr := parseAuditQuery(r.URL.RawQuery)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	rows, err := s.store.AuditEvents(r.Context(), store.AuditFilter{Event: q.event, Since: q.since, AfterID: q.afterID, Limit: q.limit + 1})
	if err != nil {
		s.unavailable(w, r, "read audit", err)
		return
	}
	page := api.AuditPage{Entries: []api.AuditEntry{}, Next: auditCursor(q.afterID)}
	if len(rows) > q.limit {
		rows, page.More = rows[:q.limit], true
	}
	for _, e := range rows {
		page.Entries = append(page.Entries, auditEntry(e))
	}
	if len(rows) > 0 {
		page.Next = auditCursor(rows[len(rows)-1].ID)
	}
	writeJSON(w, http.StatusOK, page)
}

// auditEntry is a stored audit row as GET /v1/audit gives it.
func auditEntry(e store.AuditEvent) api.AuditEntry {
	return api.AuditEntry{
		Seq: e.Seq, At: api.WireTime(e.At), Event: e.Event, IdentityID: e.IdentityID, DeviceID: e.DeviceID,
		Reason: e.Reason, RemoteAddr: e.RemoteAddr, Count: max(e.Count, 1), Prev: e.Prev, Digest: e.Digest,
	}
}

// chainParam is a request's chain: the query's or body's chain= ("" is the
// audit trail's), or the 400 naming the chains there are.
func chainParam(chain string) (string, *apiError) {
	if chain == "" {
		return api.ChainAudit, nil
	}
	if !slices.Contains(api.Chains, chain) {
		return "", errorf(http.StatusBadRequest, api.CodeFieldInvalid, "chain must be one of %s, got %q", strings.Join(api.Chains, ", "), clip(chain))
	}
	return chain, nil
}

// auditCheckpoint is GET /v1/audit/checkpoint?chain=: a chain's head, the
// audit trail's unless chain=history.
func (s *API) auditCheckpoint(w http.ResponseWriter, r *http.Request) {
	chain, aerr := chainParam(r.URL.Query().Get("chain"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	h, err := s.store.ChainHead(r.Context(), chain)
	if err != nil {
		s.unavailable(w, r, "read the "+chain+" chain's head", err)
		return
	}
	writeJSON(w, http.StatusOK, chainHead(h))
}

func chainHead(h store.ChainHead) api.ChainHead {
	v := api.ChainHead{Chain: h.Chain, Seq: h.Seq, Digest: h.Digest}
	if !h.At.IsZero() {
		v.At = api.WireTime(h.At)
	}
	return v
}

// verifyFields is the closed body of POST /v1/audit/verify.
var verifyFields = fieldsOf[api.AuditVerifyRequest](map[string]func(string) string{
	"from": func(v string) string {
		if _, err := api.ParseCheckpoint(v); err != nil {
			return err.Error()
		}
		return ""
	},
	"chain": func(v string) string {
		if _, aerr := chainParam(v); aerr != nil {
			return "must be one of " + strings.Join(api.Chains, ", ")
		}
		return ""
	},
})

// verifyAudit is POST /v1/audit/verify {"from"?}: the audit chain
// recomputed from a checkpoint, or from its anchor. A row that does not
// match is an answer (ok false, the row named), not an error.
func (s *API) verifyAudit(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	f, aerr := parseClosedBody(body, verifyFields, true)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	chain, _ := chainParam(f["chain"]) // checked by verifyFields
	var from *store.ChainHead
	if f["from"] != "" {
		cp, _ := api.ParseCheckpoint(f["from"]) // checked by verifyFields
		if f["chain"] != "" && f["chain"] != cp.Chain {
			writeError(w, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "from is a checkpoint of the %s chain, not of %s", clip(cp.Chain), chain))
			return
		}
		chain, from = cp.Chain, &store.ChainHead{Chain: cp.Chain, Seq: cp.Seq, Digest: cp.Digest}
	}
	rep, err := s.store.VerifyChain(r.Context(), chain, from)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "from names the %s chain; the chains are %s", clip(chain), strings.Join(api.Chains, ", ")))
		return
	}
	if err != nil {
		s.unavailable(w, r, "verify the "+chain+" chain", err)
		return
	}
	v := api.ChainVerification{OK: rep.Problem == nil, Rows: rep.Rows, From: chainHead(rep.From), Head: chainHead(rep.Head)}
	if rep.Problem != nil {
		v.Problem = &api.ChainProblem{Seq: rep.Problem.Seq, Why: rep.Problem.Why}
	}
	writeJSON(w, http.StatusOK, v)
}
