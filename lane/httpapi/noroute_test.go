package httpapi

import (
	"net/http"
	"testing"
)

// Errors are always {"errorCode", "message"} (docs/api.md), also for a
// path the lane does not serve and for a method an endpoint does not take:
// 404 request.not_found, and 405 request.method_not_allowed with Allow.
func TestNoRouteAnswersTheErrorShape(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("u")
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/nonexistent", http.StatusNotFound, "request.not_found", ""},
		{"GET", "/v1/devices/dev_x", http.StatusNotFound, "request.not_found", ""},
		{"GET", "/v1/device/ws/other", http.StatusNotFound, "request.not_found", ""},
		{"PUT", "/v1/devices", http.StatusMethodNotAllowed, "request.method_not_allowed", "GET, HEAD"},
		{"DELETE", "/v1/devices/enroll", http.StatusMethodNotAllowed, "request.method_not_allowed", "POST"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			for _, k := range []string{"", key} {
				r := l.do(c.method, c.path, k, "")
				if r.Status != c.status || r.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("%d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
				}
				m := r.JSON(t)
				if m["errorCode"] != c.code || m["message"] == "" || len(m) != 2 {
					t.Fatalf("body %s, want errorCode %s and a message", r.Body, c.code)
				}
				if got := r.Header.Get("Allow"); got != c.allow {
					t.Fatalf("Allow %q, want %q", got, c.allow)
				}
			}
		})
	}
}
