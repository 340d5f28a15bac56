package httpapi

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

func decodeAs[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return v
}

func (l *testLane) appendAudit(event string, n int) {
	l.t.Helper()
	rows := make([]store.AuditEvent, n)
	for i := range rows {
		rows[i] = store.AuditEvent{Event: event, DeviceID: fmt.Sprintf("dev_%d", i), RemoteAddr: "192.0.2.9"}
	}
	if err := l.store.Audit(l.t.Context(), rows...); err != nil {
		l.t.Fatal(err)
	}
}

// Only the admin reads or verifies the audit trail; anyone else gets the
// lane's usual 403 auth.forbidden.
func TestTheAuditTrailIsTheAdminsOnly(t *testing.T) {
	l := newTestLane(t)
	_, _ = l.admin()
	_, bob := l.user("bob")
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/audit", ""}, {"GET", "/v1/audit/checkpoint", ""}, {"POST", "/v1/audit/verify", "{}"},
	} {
		resp := l.do(r.method, r.path, bob, r.body)
		if resp.Status != http.StatusForbidden || !strings.Contains(string(resp.Body), api.CodeForbidden) {
			t.Errorf("%s %s as bob: %d %s", r.method, r.path, resp.Status, resp.Body)
		}
	}
}

// GET /v1/audit pages the trail oldest first with an opaque cursor that
// always says where to go on, also at the end, so that a follower polling
// with it sees each new row once; every entry carries its chain fields,
// from which its digest recomputes.
func TestTheAuditTrailIsPagedAndFollowed(t *testing.T) {
	l := newTestLane(t)
	_, admin := l.admin()
	l.appendAudit("test.paged", 7)
	var got []api.AuditEntry
	cursor := ""
	for range 3 {
		resp := l.do("GET", "/v1/audit?event=test.paged&limit=3&cursor="+url.QueryEscape(cursor), admin, "")
		if resp.Status != http.StatusOK {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		page := decodeAs[api.AuditPage](t, resp.Body)
		got = append(got, page.Entries...)
		if page.Next == "" || page.More != (len(got) < 7) {
			t.Fatalf("page ending at %d: next %q more %v", len(got), page.Next, page.More)
		}
		cursor = page.Next
	}
	if len(got) != 7 {
		t.Fatalf("%d entries, want 7", len(got))
	}
	for i, e := range got {
		c, err := e.Canonical()
		if err != nil || e.Event != "test.paged" || e.DeviceID != fmt.Sprintf("dev_%d", i) || e.Count != 1 || api.ChainDigest(e.Prev, c) != e.Digest {
			t.Fatalf("entry %d = %+v (%v): not the row written, or its digest does not recompute", i, e, err)
		}
		if i > 0 && (e.Seq != got[i-1].Seq+1 || e.Prev != got[i-1].Digest) {
			t.Fatalf("entry %d does not follow entry %d", i, i-1)
		}
	}
	empty := decodeAs[api.AuditPage](t, l.do("GET", "/v1/audit?event=test.paged&cursor="+cursor, admin, "").Body)
	if len(empty.Entries) != 0 || empty.Next != cursor || empty.More {
		t.Fatalf("at the end: %+v; want no entries and the same cursor", empty)
	}
	l.appendAudit("test.paged", 2)
	more := decodeAs[api.AuditPage](t, l.do("GET", "/v1/audit?event=test.paged&cursor="+cursor, admin, "").Body)
	if len(more.Entries) != 2 || more.Entries[0].Seq != got[6].Seq+1 {
		t.Fatalf("after 2 more rows: %+v", more)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if p := decodeAs[api.AuditPage](t, l.do("GET", "/v1/audit?since="+future, admin, "").Body); len(p.Entries) != 0 || p.Entries == nil {
		t.Fatalf("since an hour from now: %+v", p)
	}
}

func TestTheAuditQueryIsClosed(t *testing.T) {
	l := newTestLane(t)
	_, admin := l.admin()
	for _, q := range []string{"page=1", "limit=0", "limit=1001", "since=yesterday", "event=", "cursor=xyz", "cursor=" + auditCursor(5) + "&cursor=" + auditCursor(6), "event=" + strings.Repeat("e", 129)} {
		resp := l.do("GET", "/v1/audit?"+q, admin, "")
		if resp.Status != http.StatusBadRequest {
			t.Errorf("?%s: %d %s", q, resp.Status, resp.Body)
		}
	}
	for _, body := range []string{`{"from":"x"}`, `{"to":""}`, `[]`} {
		if resp := l.do("POST", "/v1/audit/verify", admin, body); resp.Status != http.StatusBadRequest {
			t.Errorf("verify %s: %d %s", body, resp.Status, resp.Body)
		}
	}
}

// The checkpoint is the chain's head; verify recomputes the chain, from it
// or from the anchor, and names the first row that does not match.
func TestVerifyNamesTheRowThatDoesNotMatch(t *testing.T) {
	l := newTestLane(t)
	_, admin := l.admin()
	l.appendAudit("test.verify", 5)
	cp := decodeAs[api.ChainHead](t, l.do("GET", "/v1/audit/checkpoint", admin, "").Body)
	if cp.Chain != api.ChainAudit || cp.Seq < 5 || !api.ValidChainDigest(cp.Digest) || cp.At == "" {
		t.Fatalf("checkpoint %+v", cp)
	}
	v := decodeAs[api.ChainVerification](t, l.do("POST", "/v1/audit/verify", admin, "").Body)
	if !v.OK || v.Rows < 5 || v.Problem != nil || v.Head.Seq < cp.Seq {
		t.Fatalf("verify: %+v", v)
	}
	v = decodeAs[api.ChainVerification](t, l.do("POST", "/v1/audit/verify", admin, `{"from":"`+cp.String()+`"}`).Body)
	if !v.OK || v.From.Seq != cp.Seq {
		t.Fatalf("verify from %s: %+v", cp, v)
	}
	db := l.store.(interface{ DB() *sql.DB }).DB()
	if _, err := db.Exec(`UPDATE audit SET remote_addr = '198.51.100.1' WHERE seq = ?`, cp.Seq-2); err != nil {
		t.Fatal(err)
	}
	v = decodeAs[api.ChainVerification](t, l.do("POST", "/v1/audit/verify", admin, "{}").Body)
	if v.OK || v.Problem == nil || v.Problem.Seq != cp.Seq-2 || !strings.Contains(v.Problem.Why, "edited") {
		t.Fatalf("verify after an edit: %+v (problem %+v)", v, v.Problem)
	}
}

// The chain of a checkpoint or a verify is audit (the default) or history;
// any other is a 400 that names the parameter and the chains there are,
// and a from of one chain with chain= another is refused.
func TestAChainThatIsNotTheLanesIsRefusedNamingTheChains(t *testing.T) {
	l := newTestLane(t)
	_, admin := l.admin()
	if h := decodeAs[api.ChainHead](t, l.do("GET", "/v1/audit/checkpoint?chain=history", admin, "").Body); h.Chain != api.ChainHistory {
		t.Fatalf("the history's checkpoint: %+v", h)
	}
	for _, tt := range []struct{ method, path, body, want string }{
		{"GET", "/v1/audit/checkpoint?chain=x", "", `chain must be one of audit, history, got \"x\"`},
		{"POST", "/v1/audit/verify", `{"chain":"x"}`, `chain must be one of audit, history"`},
		{"POST", "/v1/audit/verify", `{"chain":"history","from":"audit:0:` + api.ChainGenesis + `"}`, "from is a checkpoint of the audit chain, not of history"},
	} {
		r := l.do(tt.method, tt.path, admin, tt.body)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tt.want) {
			t.Errorf("%s %s %s: %d %s; want 400 with %q", tt.method, tt.path, tt.body, r.Status, r.Body, tt.want)
		}
	}
}
