package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/sema-agent/sema/api"
)

// The device list's query parser: never a panic; a refusal is a 400 with
// a named reason; an acceptance holds exactly the query's values, limit in
// 1..api.MaxDevicePage (500 when absent).
func FuzzParseDeviceQuery(f *testing.F) {
	for _, seed := range []string{
		"", "limit=1", "limit=1000", "limit=1001", "limit=0", "limit=01", "online=true", "online=false",
		"after=dev_01J8ZQ4T9X0000000000000000&limit=3&online=true", "after=x", "limit=1&limit=1",
		"page=1", "limit=1;online=true", "after=%zz", "&&&", "=",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, aerr := parseDeviceQuery(raw)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest || (aerr.Code != api.CodeBodyShape && aerr.Code != api.CodeFieldInvalid) || aerr.Message == "" {
				t.Fatalf("%q: refused %+v", raw, aerr)
			}
			return
		}
		values, err := url.ParseQuery(raw)
		wantLimit := strconv.Itoa(api.DefaultDevicePage)
		if values.Has("limit") {
			wantLimit = values.Get("limit")
		}
		if err != nil || len(values) > 3 || q.limit < 1 || q.limit > api.MaxDevicePage || strconv.Itoa(q.limit) != wantLimit ||
			q.after != values.Get("after") || (q.after != "" && !validDeviceID(q.after)) || q.online != values.Has("online") {
			t.Fatalf("%q: accepted as %+v", raw, q)
		}
	})
}
