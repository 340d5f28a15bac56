package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/sema-agent/sema/api"
)

// The history's query parser: never a panic; a refusal is a 400 with a
// named reason; an acceptance holds exactly the query's values, limit in
// 1..api.MaxInstructionPage, and reads one row past the page.
func FuzzParseHistoryQuery(f *testing.F) {
	for _, seed := range []string{
		"", "limit=1", "limit=1000", "limit=1001", "device=dev_01J8ZQ4T9X0000000000000000", "device=x",
		"session=ses_1", "session=", "outcome=ok", "outcome=outcome_unknown", "outcome=cancelled:cancelled_before_start",
		"since=2026-12-01T08:00:00Z", "until=2026-12-01T08:00:00.5+02:00", "since=0000-01-01T00:00:00Z",
		"cursor=" + historyCursor(7), "cursor=aDE6MA", "cursor=aDE6LTE", "identity=idn_01J8ZQ4T9X0000000000000000",
		"limit=1&limit=1", "page=1", "&&&", "=", "since=%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, aerr := parseHistoryQuery(raw)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest || (aerr.Code != api.CodeBodyShape && aerr.Code != api.CodeFieldInvalid) || aerr.Message == "" {
				t.Fatalf("%q: refused %+v", raw, aerr)
			}
			return
		}
		values, err := url.ParseQuery(raw)
		wantLimit := strconv.Itoa(api.DefaultInstructionPage)
		if values.Has("limit") {
			wantLimit = values.Get("limit")
		}
		f := q.filter
		if err != nil || len(values) > len(historyQueryKeys) || q.limit < 1 || q.limit > api.MaxInstructionPage ||
			strconv.Itoa(q.limit) != wantLimit || f.Limit != q.limit+1 || f.After < 0 ||
			f.DeviceID != values.Get("device") || f.RootSessionID != values.Get("session") || f.Outcome != values.Get("outcome") ||
			q.identity != values.Get("identity") || (values.Has("cursor") && historyCursor(f.After) != values.Get("cursor")) ||
			f.Since.IsZero() == values.Has("since") || f.Until.IsZero() == values.Has("until") {
			t.Fatalf("%q: accepted as %+v", raw, q)
		}
	})
}
