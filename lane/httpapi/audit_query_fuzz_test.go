package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/sema-agent/sema/api"
)

// The audit trail's query parser: never a panic; a refusal is a 400 with a
// named reason; an acceptance holds exactly the query's values.
func FuzzParseAuditQuery(f *testing.F) {
	for _, seed := range []string{
		"", "limit=1", "limit=1000", "limit=1001", "since=2026-12-06T09:00:00Z", "since=2h", "event=device.connected",
		"cursor=" + auditCursor(42), "cursor=" + auditCursor(0), "cursor=YXVkaXQuMDE", "cursor=%zz", "event=&limit=2", "x=1", "&&&",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, aerr := parseAuditQuery(raw)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest || (aerr.Code != api.CodeBodyShape && aerr.Code != api.CodeFieldInvalid) || aerr.Message == "" {
				t.Fatalf("%q: refused %+v", raw, aerr)
			}
			return
		}
		values, err := url.ParseQuery(raw)
		wantLimit := strconv.Itoa(api.DefaultAuditPage)
		if values.Has("limit") {
			wantLimit = values.Get("limit")
		}
		if err != nil || len(values) > 4 || strconv.Itoa(q.limit) != wantLimit || q.event != values.Get("event") || q.afterID < 0 {
			t.Fatalf("%q: accepted as %+v", raw, q)
		}
		if values.Get("cursor") != "" && auditCursor(q.afterID) != values.Get("cursor") {
			t.Fatalf("%q: the cursor read as %d, which is not the cursor given", raw, q.afterID)
		}
	})
}
