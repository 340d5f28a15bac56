package bench

import (
	"net/http"
	"testing"
)

// `exec true` through the HTTP API in one process — the lane on a loopback
// HTTP server, the real executor, a keep-alive client — so that the round trip
// can be profiled (-cpuprofile, -trace) without the CLI's
// processes. BenchmarkPairs' exec row is the same without HTTP.
func BenchmarkHTTPExecTrue(b *testing.B) {
	r, err := NewRig(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	u := &UserPath{URL: r.URL, Key: r.APIKey, DeviceID: r.DeviceID, Workspace: r.Workspace}
	hc := &http.Client{}
	const body = `{"kind":"exec","args":{"command":"true"},"timeoutMs":10000}`
	for b.Loop() {
		if _, err := instructStats(b.Context(), hc, u, body); err != nil {
			b.Fatal(err)
		}
	}
}
