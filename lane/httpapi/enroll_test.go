package httpapi

// The enrollment endpoints (§1.1) over HTTP: tokens, registration, its
// refusals, its rate limit.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/lane/store"
)

func TestIssueEnrollToken(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	for _, body := range []string{"", "{}", " { } "} {
		r := l.do("POST", "/v1/devices/enroll-tokens", key, body)
		m := r.JSON(t)
		if r.Status != 200 || len(m) != 3 || m["ttlSec"] != float64(900) {
			t.Fatalf("body %q: %d %s", body, r.Status, r.Body)
		}
		tok, _ := m["token"].(string)
		if len(tok) < 40 || len(tok) > 256 {
			t.Fatalf("token of %d characters", len(tok))
		}
		exp, err := time.Parse(time.RFC3339Nano, m["expiresAt"].(string))
		if err != nil || time.Until(exp) < 890*time.Second || time.Until(exp) > 910*time.Second {
			t.Fatalf("expiresAt %v (%v), want about 900 s from now", m["expiresAt"], err)
		}
	}
	// §1.1: "a closed shape with zero accepted keys; any key is a 400".
	lanetest.WantError(t, l.do("POST", "/v1/devices/enroll-tokens", key, `{"identity":"bob"}`), 400, "request.body_shape", `"identity"`)
	lanetest.WantError(t, l.do("POST", "/v1/devices/enroll-tokens", key, `{`), 400, "request.invalid_json", "JSON")
	lanetest.WantError(t, l.do("POST", "/v1/devices/enroll-tokens", key, `[]`), 400, "request.body_shape", "object")
	lanetest.WantError(t, l.do("POST", "/v1/devices/enroll-tokens", "", ""), 403, "auth.forbidden", "identity")
}

func TestTokenTTLIsConfigurable(t *testing.T) {
	l := newTestLane(t, func(c *lane.Config) { c.TokenTTL = 60 * time.Second })
	_, key := l.user("alice")
	if m := l.do("POST", "/v1/devices/enroll-tokens", key, "").JSON(t); m["ttlSec"] != float64(60) {
		t.Fatalf("ttlSec = %v, want 60", m["ttlSec"])
	}
}

// §1.1 "What POST /v1/devices/enroll answers, case by case".
func TestEnrollFirstRegistrationAndReplay(t *testing.T) {
	l := newTestLane(t)
	alice, key := l.user("alice")
	token, pub := l.issueToken(key), lanetest.NewPubkey(t)
	first := l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(token, pub))
	if first.Status != 200 {
		t.Fatalf("first registration: %d %s", first.Status, first.Body)
	}
	m := first.JSON(t)
	id, _ := m["deviceId"].(string)
	if len(m) != 1 || !strings.HasPrefix(id, "dev_") || len(id) != 30 {
		t.Fatalf("body %s, want exactly {\"deviceId\": \"dev_…\"}", first.Body)
	}
	again := l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(token, pub))
	if again.Status != 200 || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: %d %s, want the same 200 %s", again.Status, again.Body, first.Body)
	}
	devices, _ := l.store.ListDevices(t.Context(), alice.ID, store.DevicePage{})
	if len(devices) != 1 {
		t.Fatalf("%d device rows after a replay, want 1", len(devices))
	}
	d := devices[0]
	if d.PlatformOS != "linux" || d.PlatformArch != "amd64" || d.DisplayName != "laptop" || d.WorkspaceRoot != "/home/u/work" || d.OwnerID != alice.ID {
		t.Fatalf("stored device %+v", d)
	}
}

// §1.1: the four 403 device.enrollment_invalid rows are byte-identical on
// the wire; only the audit trail tells them apart.
func TestEnrollFourRefusalsAreByteIdentical(t *testing.T) {
	l := newTestLane(t)
	alice, key := l.user("alice")
	_, bobKey := l.user("bob")
	used := l.issueToken(key)
	if r := l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(used, lanetest.NewPubkey(t))); r.Status != 200 {
		t.Fatal(r.Status)
	}
	expired := "set_expired_" + strings.Repeat("x", 20)
	if _, err := l.store.CreateEnrollToken(t.Context(), alice.ID, store.DigestOf(expired), 0); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, apiKey, token, reason string
	}{
		{"unknown token", key, "set_" + strings.Repeat("A", 43), "token_unknown"},
		{"expired token", key, expired, "token_expired"},
		{"another identity's token", bobKey, l.issueToken(key), "token_wrong_identity"},
		{"token used with another key", key, used, "token_reuse"},
	}
	var bodies [][]byte
	for _, c := range cases {
		r := l.do("POST", "/v1/devices/enroll", c.apiKey, lanetest.EnrollBody(c.token, lanetest.NewPubkey(t)))
		if r.Status != 403 || r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
		}
		bodies = append(bodies, r.Body)
	}
	for i, b := range bodies {
		if !bytes.Equal(b, bodies[0]) {
			t.Errorf("%s answered %s, %s answered %s", cases[i].name, b, cases[0].name, bodies[0])
		}
	}
	if m := (lanetest.Response{Body: bodies[0]}).JSON(t); m["errorCode"] != "device.enrollment_invalid" || !strings.Contains(m["message"].(string), "Ask for a new enrollment token") {
		t.Errorf("refusal body %s", bodies[0])
	}
	// The audit trail merges identical refusals over a window of the lane's
	// clock; its end writes them.
	l.clock.Advance(time.Minute)
	rows := l.auditRows(store.AuditFilter{Event: string(lane.EventEnrollRefused)}, 4)
	var reasons []string
	for _, e := range rows {
		reasons = append(reasons, e.Reason)
	}
	want := []string{"token_unknown", "token_expired", "token_wrong_identity", "token_reuse"}
	if strings.Join(reasons, ",") != strings.Join(want, ",") {
		t.Errorf("audit reasons %v, want %v", reasons, want)
	}
}

func TestEnrollBodyShapeAndFields(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	token, pub := l.issueToken(key), lanetest.NewPubkey(t)
	with := func(k string, v any) string {
		m := map[string]any{"token": token, "pubkey": pub, "platformOs": "linux", "workspaceRoot": "/w"}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name, body, code, mentions string
	}{
		{"not JSON", `{"token":`, "request.invalid_json", "JSON"},
		{"not an object", `["token"]`, "request.body_shape", "object"},
		{"unknown key", with("deviceId", "dev_x"), "request.body_shape", `"deviceId"`},
		{"owner is not an input", with("owner", "bob"), "request.body_shape", `"owner"`},
		{"missing token", with("token", nil), "request.body_shape", `"token"`},
		{"missing pubkey", with("pubkey", nil), "request.body_shape", `"pubkey"`},
		{"missing platformOs", with("platformOs", nil), "request.body_shape", `"platformOs"`},
		{"missing workspaceRoot", with("workspaceRoot", nil), "request.body_shape", `"workspaceRoot"`},
		{"repeated key", `{"token":"a","token":"b","pubkey":"x","platformOs":"linux","workspaceRoot":"/w"}`, "request.body_shape", "repeats"},
		{"token not a string", with("token", 7), "request.field_invalid", "token"},
		{"empty token", with("token", ""), "request.field_invalid", "token"},
		{"token of 257 characters", with("token", strings.Repeat("t", 257)), "request.field_invalid", "token"},
		{"pubkey not a string", with("pubkey", []int{1}), "request.field_invalid", "pubkey"},
		{"pubkey with surrounding whitespace", with("pubkey", " "+pub), "request.field_invalid", "pubkey"},
		{"pubkey with a line break", with("pubkey", pub[:20]+"\n"+pub[20:]), "request.field_invalid", "pubkey"},
		{"pubkey url-safe alphabet", with("pubkey", base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))), "request.field_invalid", "pubkey"},
		{"pubkey without padding", with("pubkey", strings.TrimRight(pub, "=")), "request.field_invalid", "pubkey"},
		{"pubkey of 31 bytes", with("pubkey", base64.StdEncoding.EncodeToString(make([]byte, 31))), "request.field_invalid", "pubkey"},
		{"pubkey of 33 bytes", with("pubkey", base64.StdEncoding.EncodeToString(make([]byte, 33))), "request.field_invalid", "pubkey"},
		{"pubkey over 128 bytes", with("pubkey", strings.Repeat("A", 132)), "request.field_invalid", "pubkey"},
		{"platformOs windows", with("platformOs", "windows"), "request.field_invalid", "platformOs"},
		{"platformOs upper case", with("platformOs", "Linux"), "request.field_invalid", "platformOs"},
		{"platformOs null", with("platformOs", json.RawMessage("null")), "request.field_invalid", "platformOs"},
		{"platformArch of 33 bytes", with("platformArch", strings.Repeat("a", 33)), "request.field_invalid", "platformArch"},
		{"displayName of 256 bytes", with("displayName", strings.Repeat("n", 256)), "request.field_invalid", "displayName"},
		{"empty workspaceRoot", with("workspaceRoot", ""), "request.field_invalid", "workspaceRoot"},
		{"workspaceRoot of 1025 bytes", with("workspaceRoot", "/"+strings.Repeat("w", 1024)), "request.field_invalid", "workspaceRoot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l.clock.Advance(time.Minute) // stay inside the rate budget
			lanetest.WantError(t, l.do("POST", "/v1/devices/enroll", key, tt.body), 400, tt.code, tt.mentions)
		})
	}
	// The bounds themselves are accepted, and the token was never consumed.
	l.clock.Advance(time.Minute)
	ok := with("displayName", strings.Repeat("n", 255))
	var m map[string]any
	json.Unmarshal([]byte(ok), &m)
	m["platformArch"], m["workspaceRoot"] = strings.Repeat("a", 32), "/"+strings.Repeat("w", 1023)
	b, _ := json.Marshal(m)
	if r := l.do("POST", "/v1/devices/enroll", key, string(b)); r.Status != 200 {
		t.Fatalf("a body at every bound: %d %s", r.Status, r.Body)
	}
}

func TestTokenOf256CharactersIsAccepted(t *testing.T) {
	l := newTestLane(t)
	alice, key := l.user("alice")
	long := "set_" + strings.Repeat("z", 252)
	if _, err := l.store.CreateEnrollToken(t.Context(), alice.ID, store.DigestOf(long), time.Minute); err != nil {
		t.Fatal(err)
	}
	if r := l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(long, lanetest.NewPubkey(t))); r.Status != 200 {
		t.Fatalf("a 256-character token: %d %s", r.Status, r.Body)
	}
}

func TestEnrollNeedsAVerifiedIdentity(t *testing.T) {
	l := newTestLane(t)
	for _, auth := range []string{"", "sema_not_a_key", "Basic abc"} {
		req, _ := http.NewRequest("POST", l.url+"/v1/devices/enroll", strings.NewReader(lanetest.EnrollBody("set_x", lanetest.NewPubkey(t))))
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lanetest.WantError(t, lanetest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, 403, "auth.forbidden", "")
	}
}

func TestLaneOffAnswers501(t *testing.T) {
	l := newTestLane(t, func(c *lane.Config) { c.Disabled = true })
	_, key := l.user("alice")
	for _, p := range []string{"/v1/devices/enroll-tokens", "/v1/devices/enroll"} {
		lanetest.WantError(t, l.do("POST", p, key, "{}"), 501, "capability.device_lane_required", "device lane")
	}
}

// §1.1: 10 per 60 s fixed window per identity, issuing and registering
// counted separately, 429 with retry-after, decided before the token is
// touched.
func TestEnrollRateLimit(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	_, bobKey := l.user("bob")
	var token string
	for i := range 10 {
		token = l.issueToken(key)
		_ = i
	}
	r := l.do("POST", "/v1/devices/enroll-tokens", key, "")
	lanetest.WantError(t, r, 429, "limit.rate_exceeded", "retry-after")
	// The clock sits 10 s into its window: 50 s remain.
	if got := r.Header.Get("Retry-After"); got != "50" {
		t.Fatalf("retry-after %q, want 50", got)
	}
	if r := l.do("POST", "/v1/devices/enroll-tokens", bobKey, ""); r.Status != 200 {
		t.Fatalf("bob was limited by alice's budget: %d", r.Status)
	}
	// Registration has its own budget.
	pub := lanetest.NewPubkey(t)
	for i := range 10 {
		r := l.do("POST", "/v1/devices/enroll", key, `{"token":1}`)
		if r.Status != 400 {
			t.Fatalf("registration %d: %d %s", i, r.Status, r.Body)
		}
	}
	r = l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(token, pub))
	lanetest.WantError(t, r, 429, "limit.rate_exceeded", "retry-after")
	// The refused attempt did not consume the token: the same token and key
	// succeed once the window has passed.
	l.clock.Advance(50 * time.Second)
	if r := l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(token, pub)); r.Status != 200 {
		t.Fatalf("after the window: %d %s", r.Status, r.Body)
	}
}

// Concurrent registration of one token: with two keys exactly one wins; with
// one key, one device row.
func TestConcurrentEnrollOverHTTP(t *testing.T) {
	l := newTestLane(t)
	alice, key := l.user("alice")
	token := l.issueToken(key)
	keys := []string{lanetest.NewPubkey(t), lanetest.NewPubkey(t)}
	statuses := make([]int, 2)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			statuses[i] = l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(token, keys[i])).Status
		})
	}
	wg.Wait()
	if statuses[0]+statuses[1] != 200+403 {
		t.Fatalf("statuses %v, want one 200 and one 403", statuses)
	}
	same := l.issueToken(key)
	pub := lanetest.NewPubkey(t)
	bodies := make([]string, 4)
	for i := range bodies {
		wg.Go(func() {
			bodies[i] = string(l.do("POST", "/v1/devices/enroll", key, lanetest.EnrollBody(same, pub)).Body)
		})
	}
	wg.Wait()
	for _, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, "dev_") {
			t.Fatalf("concurrent replays answered %q", bodies)
		}
	}
	if devices, _ := l.store.ListDevices(t.Context(), alice.ID, store.DevicePage{}); len(devices) != 2 {
		t.Fatalf("%d devices, want 2", len(devices))
	}
}
