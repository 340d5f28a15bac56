package httpapi

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/protocol"
)

// The streamed write's query parser: never a panic; a refusal is a 400
// with a named reason; an acceptance is a write the lane can frame, whose
// values are exactly the query's.
func FuzzParseWriteQuery(f *testing.F) {
	sum := "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
	for _, seed := range []string{
		"path=/w/f&timeoutMs=1000&sha256=" + sum,
		"kind=appendFile&path=/w/a%20b&timeoutMs=9223372036854&sha256=" + sum + "&rootSessionId=s",
		"kind=writeFileGuarded&path=/w/f&timeoutMs=1&sha256=" + sum + `&expect={"canonicalPath":"/w/f","fileId":"7","exclusive":true}`,
		"kind=writeFileExclusive&path=/&timeoutMs=1&sha256=" + sum,
		"path=/w/f&path=/w/g&timeoutMs=1&sha256=" + sum,
		"path=/w/f;x&timeoutMs=1&sha256=" + sum,
		"path=%zz", "", "&&&", "=", "kind=exec", "expect={", "timeoutMs=01",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, aerr := parseWriteQuery(raw)
		if aerr != nil {
			if aerr.Status != http.StatusBadRequest || (aerr.Code != api.CodeBodyShape && aerr.Code != api.CodeFieldInvalid) || aerr.Message == "" {
				t.Fatalf("%q: refused %+v", raw, aerr)
			}
			return
		}
		values, _ := url.ParseQuery(raw)
		if !q.kind.IsWrite() || !protocol.ValidAbsPath(q.args.Path) || q.args.Path != values.Get("path") ||
			q.timeoutMs <= 0 || q.timeoutMs > protocol.MaxSafeInteger || q.sha256.String() != values.Get("sha256") ||
			(q.args.Expect != nil) != (q.kind == protocol.KindWriteFileGuarded) || q.rootSessionID != values.Get("rootSessionId") {
			t.Fatalf("%q: accepted as %+v", raw, q)
		}
		frame, err := lane.BuildFrame(lane.Instruction{Kind: q.kind, Args: q.args, Timeout: time.Duration(q.timeoutMs) * time.Millisecond,
			RootSessionID: q.rootSessionID, ContentStream: http.NoBody, ContentLen: 1, ContentSHA256: q.sha256})
		if err == nil && frame.TimeoutMs != q.timeoutMs {
			t.Fatalf("%q: timeoutMs %d framed as %d", raw, q.timeoutMs, frame.TimeoutMs)
		}
		if err != nil {
			t.Fatalf("%q: accepted, but it cannot be framed: %v", raw, err)
		}
	})
}
