package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
)

var historyT0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// recordHistory writes n rows of identity on device, a minute apart.
func (l *testLane) recordHistory(identity, device string, from, n int) {
	l.t.Helper()
	rows := make([]store.HistoryRow, n)
	for i := range rows {
		at := historyT0.Add(time.Duration(from+i) * time.Minute)
		rows[i] = store.HistoryRow{InstructionID: fmt.Sprintf("ins_%s_%03d", identity, from+i), IdentityID: identity, DeviceID: device,
			Kind: "exec", Summary: "true", ReceivedAt: at, SettledAt: at.Add(time.Second), Outcome: "ok"}
	}
	if err := l.store.RecordHistory(l.t.Context(), rows...); err != nil {
		l.t.Fatal(err)
	}
}

func (l *testLane) history(key, query string) api.InstructionList {
	l.t.Helper()
	r := l.do("GET", "/v1/instructions?"+query, key, "")
	var page api.InstructionList
	if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != 200 || page.Instructions == nil || page.Cursor == "" {
		l.t.Fatalf("GET /v1/instructions?%s: %d %s", query, r.Status, r.Body)
	}
	return page
}

// An identity reads its own history only; the admin reads anyone's, and
// may choose one with identity=.
func TestTheHistoryIsTheCallersOwn(t *testing.T) {
	l := newTestLane(t)
	alice, aliceKey := l.user("alice")
	bob, bobKey := l.user("bob")
	_, adminKey, err := lane.CreateAdminIdentity(t.Context(), l.store, "admin")
	if err != nil {
		t.Fatal(err)
	}
	l.recordHistory(alice.ID, "dev_A", 0, 3)
	l.recordHistory(bob.ID, "dev_B", 3, 2)
	if got := l.history(aliceKey, ""); len(got.Instructions) != 3 || got.Instructions[0].IdentityID != alice.ID {
		t.Fatalf("alice's history: %+v", got)
	}
	if got := l.history(adminKey, ""); len(got.Instructions) != 5 {
		t.Fatalf("the admin's history: %d rows, want 5", len(got.Instructions))
	}
	if got := l.history(adminKey, "identity="+bob.ID); len(got.Instructions) != 2 || got.Instructions[0].IdentityID != bob.ID {
		t.Fatalf("the admin's history of bob: %+v", got)
	}
	lanetest.WantError(t, l.do("GET", "/v1/instructions?identity="+bob.ID, aliceKey, ""), 403, api.CodeForbidden, "admin")
	if got := l.history(aliceKey, "identity="+alice.ID); len(got.Instructions) != 3 {
		t.Fatalf("alice naming herself: %d rows", len(got.Instructions))
	}

	// One row by id: another identity's is 404, as an unknown one.
	if r := l.do("GET", "/v1/instructions/ins_"+alice.ID+"_001", aliceKey, ""); r.Status != 200 || r.JSON(t)["summary"] != "true" {
		t.Fatalf("alice's row: %d %s", r.Status, r.Body)
	}
	lanetest.WantError(t, l.do("GET", "/v1/instructions/ins_"+alice.ID+"_001", bobKey, ""), 404, api.CodeInstructionNotFound, "ins_")
	lanetest.WantError(t, l.do("GET", "/v1/instructions/ins_none", bobKey, ""), 404, api.CodeInstructionNotFound, "ins_none")
	if r := l.do("GET", "/v1/instructions/ins_"+alice.ID+"_001", adminKey, ""); r.Status != 200 {
		t.Fatalf("the admin reading alice's row: %d %s", r.Status, r.Body)
	}
	lanetest.WantError(t, l.do("GET", "/v1/instructions", "", ""), 403, api.CodeForbidden, "")
}

// Pages follow each other by next; cursor, kept after the last page,
// returns the rows settled since (a follower's poll).
func TestTheHistoryIsPagedAndFollowedByCursor(t *testing.T) {
	l := newTestLane(t)
	alice, key := l.user("alice")
	l.recordHistory(alice.ID, "dev_A", 0, 5)
	var seen []string
	page := l.history(key, "limit=2")
	for {
		for _, r := range page.Instructions {
			seen = append(seen, r.InstructionID)
		}
		if page.Next == "" {
			break
		}
		page = l.history(key, "limit=2&cursor="+page.Next)
	}
	if len(seen) != 5 || seen[4] != "ins_"+alice.ID+"_004" {
		t.Fatalf("paged through %v", seen)
	}
	end := page.Cursor
	if again := l.history(key, "cursor="+end); len(again.Instructions) != 0 || again.Cursor != end {
		t.Fatalf("nothing new: %+v, want no row and the same cursor", again)
	}
	l.recordHistory(alice.ID, "dev_A", 5, 1)
	if more := l.history(key, "cursor="+end); len(more.Instructions) != 1 || more.Instructions[0].InstructionID != "ins_"+alice.ID+"_005" {
		t.Fatalf("after a new row: %+v", more)
	}
	// Filters.
	if got := l.history(key, "since="+url.QueryEscape(historyT0.Add(3*time.Minute).Format(time.RFC3339))+"&until="+url.QueryEscape(historyT0.Add(5*time.Minute).Format(time.RFC3339))); len(got.Instructions) != 2 {
		t.Fatalf("since and until: %d rows, want 2", len(got.Instructions))
	}
	if got := l.history(key, "outcome=outcome_unknown"); len(got.Instructions) != 0 {
		t.Fatalf("outcome_unknown: %d rows, want none", len(got.Instructions))
	}
}

// A bad query is a 400 naming the parameter.
func TestABadHistoryQueryNamesTheParameter(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	for _, tt := range []struct{ query, code, names string }{
		{"device=laptop", api.CodeFieldInvalid, "device"},
		{"session=", api.CodeFieldInvalid, "session"},
		{"outcome=fine", api.CodeFieldInvalid, "outcome"},
		{"outcome=cancelled:maybe", api.CodeFieldInvalid, "outcome"},
		{"since=2h", api.CodeFieldInvalid, "since"},
		{"until=yesterday", api.CodeFieldInvalid, "until"},
		{"cursor=42", api.CodeFieldInvalid, "cursor"},
		{"identity=alice", api.CodeFieldInvalid, "identity"},
		{"limit=0", api.CodeFieldInvalid, "limit"},
		{"limit=1001", api.CodeFieldInvalid, "limit"},
		{"page=2", api.CodeBodyShape, "page"},
		{"device=a&device=b", api.CodeBodyShape, "device"},
	} {
		lanetest.WantError(t, l.do("GET", "/v1/instructions?"+tt.query, key, ""), 400, tt.code, tt.names)
	}
}

// An instruction sent over HTTP is recorded with the caller's identity,
// key and address, once, by the replica that settled it.
func TestAnHTTPInstructionIsRecordedWithItsCaller(t *testing.T) {
	l := newTestLane(t)
	alice, key := l.user("alice")
	dev := l.enroll(key)
	r := l.do("POST", "/v1/devices/"+dev+"/instructions", key, `{"kind":"exec","args":{"command":"make test"},"timeoutMs":1000}`)
	if r.Status != 200 {
		t.Fatalf("POST instruction: %d %s", r.Status, r.Body)
	}
	var page api.InstructionList
	eventually(t, "the history row", func() bool {
		l.clock.Advance(10 * time.Millisecond) // the writer gathers rows by the lane's clock
		page = l.history(key, "device="+dev)
		return len(page.Instructions) > 0
	})
	keys, err := l.store.ListAPIKeys(t.Context(), alice.ID)
	if err != nil || len(keys) != 1 {
		t.Fatal(keys, err)
	}
	got := page.Instructions[0]
	if len(page.Instructions) != 1 || got.IdentityID != alice.ID || got.APIKeyID != keys[0].ID || got.RemoteAddr != "127.0.0.1" ||
		got.Summary != "make test" || got.Outcome != "target_unavailable" || got.DispatchedAt != "" || got.ReceivedAt == "" {
		t.Fatalf("history %+v", page.Instructions)
	}
}
