package lane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// Doors is the HTTP API over a Server as the tests drive it: package
// httpapi's, which doors_test.go (package lane_test, which may import it)
// puts in NewDoors.
type Doors interface {
	http.Handler
	Metrics() Metrics
	WriteMetrics(io.Writer) error
}

// NewDoors builds the HTTP API over a Server; see Doors.
var NewDoors func(*Server) Doors

// testLane is a real lane over real HTTP on a real SQLite file.
type testLane struct {
	t     testing.TB
	dir   string // the data dir of the SQLite registry
	url   string
	store store.Store
	clock *clock.Fake // the lane's clock (Config.Clock)
	srv   *Server
	doors Doors
}

// advertiseSelf as Config.AdvertiseURL makes newTestLane advertise the
// lane's own test server: a replica its peers reach.
const advertiseSelf = "test:self"

func newTestLane(t testing.TB, mutate ...func(*Config)) *testLane {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Store: st, Clock: clock.NewFake(time.Date(2026, 11, 30, 8, 0, 10, 0, time.UTC))}
	for _, m := range mutate {
		m(&cfg)
	}
	clk, _ := cfg.Clock.(*clock.Fake)
	hs := httptest.NewUnstartedServer(nil)
	if cfg.AdvertiseURL == advertiseSelf {
		cfg.AdvertiseURL = "http://" + hs.Listener.Addr().String()
	}
	srv, err := New(cfg)
	if err != nil {
		hs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	doors := NewDoors(srv)
	hs.Config.Handler = doors
	hs.Start()
	t.Cleanup(hs.Close)
	return &testLane{t: t, dir: dir, url: hs.URL, store: cfg.Store, clock: clk, srv: srv, doors: doors}
}

// auditRows returns the audit rows written so far (the auditor is
// asynchronous: flush first).
func (l *testLane) auditRows(f store.AuditFilter) []store.AuditEvent {
	l.t.Helper()
	l.srv.audits.flush()
	rows, err := l.store.AuditEvents(l.t.Context(), f)
	if err != nil {
		l.t.Fatal(err)
	}
	return rows
}

// user creates an identity and returns its API key.
func (l *testLane) user(name string) (store.Identity, string) {
	l.t.Helper()
	idn, key, err := CreateIdentity(l.t.Context(), l.store, name)
	if err != nil {
		l.t.Fatal(err)
	}
	return idn, key
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

func (l *testLane) do(method, path, apiKey, body string) response {
	l.t.Helper()
	req, err := http.NewRequestWithContext(l.t.Context(), method, l.url+path, strings.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

func (l *testLane) issueToken(apiKey string) string {
	l.t.Helper()
	r := l.do("POST", "/v1/devices/enroll-tokens", apiKey, "")
	if r.status != 200 {
		l.t.Fatalf("issue token: %d %s", r.status, r.body)
	}
	return r.json(l.t)["token"].(string)
}

func newPubkey(t testing.TB) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pub)
}

func enrollBody(token, pubkey string) string {
	b, _ := json.Marshal(map[string]string{
		"token": token, "pubkey": pubkey, "platformOs": "linux", "platformArch": "amd64",
		"displayName": "laptop", "workspaceRoot": "/home/u/work",
	})
	return string(b)
}

func wantError(t *testing.T, r response, status int, code, mentions string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d (%s), want %d", r.status, r.body, status)
	}
	m := r.json(t)
	if m["errorCode"] != code {
		t.Fatalf("errorCode %v (%s), want %s", m["errorCode"], r.body, code)
	}
	msg, _ := m["message"].(string)
	if msg == "" || !strings.Contains(msg, mentions) {
		t.Fatalf("message %q does not mention %q", msg, mentions)
	}
	if len(m) != 2 {
		t.Fatalf("error body %s has keys beyond errorCode and message", r.body)
	}
}

func TestCapabilities(t *testing.T) {
	l := newTestLane(t)
	r := l.do("GET", "/v1/capabilities", "", "")
	var got struct {
		DeviceExecutor struct {
			Enabled              bool   `json:"enabled"`
			ProtocolVersion      int    `json:"protocolVersion"`
			MaxInflightPerDevice int    `json:"maxInflightPerDevice"`
			WSPath               string `json:"wsPath"`
			Management           map[string]string
		} `json:"deviceExecutor"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
		t.Fatalf("capabilities: %d %s %v", r.status, r.body, err)
	}
	de := got.DeviceExecutor
	if !de.Enabled || de.ProtocolVersion != 1 || de.MaxInflightPerDevice != 4 || de.WSPath != "/v1/device/ws" || de.Management["enroll"] != "/v1/devices/enroll" || de.Management["mcp"] != "/v1/mcp" || de.Management["sessions"] != "/v1/sessions" || de.Management["apiKeys"] != "/v1/api-keys" {
		t.Fatalf("capabilities = %s", r.body)
	}
	off := newTestLane(t, func(c *Config) { c.Disabled = true })
	if r := off.do("GET", "/v1/capabilities", "", ""); string(r.body) != `{"deviceExecutor":false}` {
		t.Fatalf("capabilities with the lane off = %s, want {\"deviceExecutor\":false}", r.body)
	}
}

func TestDevicesListAndRevoke(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	_, bobKey := l.user("bob")
	enroll := func(k string) string {
		r := l.do("POST", "/v1/devices/enroll", k, enrollBody(l.issueToken(k), newPubkey(t)))
		return r.json(t)["deviceId"].(string)
	}
	mine, bobs := enroll(key), enroll(bobKey)
	var list struct {
		Devices []api.Device `json:"devices"`
	}
	json.Unmarshal(l.do("GET", "/v1/devices", key, "").body, &list)
	if len(list.Devices) != 1 || list.Devices[0].DeviceID != mine || list.Devices[0].Revoked {
		t.Fatalf("alice's devices = %+v", list.Devices)
	}
	wantError(t, l.do("POST", "/v1/devices/"+bobs+"/revoke", key, ""), 404, "device.not_found", bobs)
	r := l.do("POST", "/v1/devices/"+mine+"/revoke", key, "")
	if r.status != 200 || r.json(t)["revoked"] != true {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r2 := l.do("POST", "/v1/devices/"+mine+"/revoke", key, ""); r2.status != 200 || r2.json(t)["revokedAt"] != r.json(t)["revokedAt"] {
		t.Fatalf("a second revoke changed the revocation: %s then %s", r.body, r2.body)
	}
	if d, _ := l.store.Device(t.Context(), bobs); d.Revoked() {
		t.Fatal("bob's device was revoked")
	}
	rows := l.auditRows(store.AuditFilter{DeviceID: mine, Event: string(EventRevoked)})
	if len(rows) != 2 {
		t.Fatalf("%d revoke audit rows, want 2", len(rows))
	}
	json.Unmarshal(l.do("GET", "/v1/devices", key, "").body, &list)
	if !list.Devices[0].Revoked || list.Devices[0].RevokedAt == "" {
		t.Fatalf("after revoke: %+v", list.Devices[0])
	}
}
