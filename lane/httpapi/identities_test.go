package httpapi

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// admin creates the lane's admin identity and returns its API key.
func (l *testLane) admin() (store.Identity, string) {
	l.t.Helper()
	idn, key, err := lane.CreateAdminIdentity(l.t.Context(), l.store, "admin")
	if err != nil {
		l.t.Fatal(err)
	}
	return idn, key
}

// createIdentityHTTP is POST /v1/identities as the admin.
func (l *testLane) createIdentityHTTP(t *testing.T, adminKey, name string) api.CreateIdentityResponse {
	t.Helper()
	return lanetest.Decode[api.CreateIdentityResponse](t, l.do("POST", "/v1/identities", adminKey, `{"name":"`+name+`"}`))
}

// POST /v1/identities {"name"} → {"identityId","name","apiKey"};
// the key works at once, and GET /v1/identities lists every identity
// without a key.
func TestCreateIdentityAnswersItsKeyOnce(t *testing.T) {
	l := newTestLane(t)
	admin, adminKey := l.admin()
	bob := l.createIdentityHTTP(t, adminKey, "bob")
	if !strings.HasPrefix(bob.IdentityID, "idn_") || bob.Name != "bob" || !strings.HasPrefix(bob.APIKey, "sema_") {
		t.Fatalf("created %+v", bob)
	}
	if r := l.do("GET", "/v1/devices", bob.APIKey, ""); r.Status != 200 {
		t.Fatalf("bob's new key: %d %s", r.Status, r.Body)
	}
	r := l.do("GET", "/v1/identities", adminKey, "")
	list := lanetest.Decode[api.IdentityList](t, r)
	want := []api.Identity{
		{IdentityID: admin.ID, Name: "admin", Admin: true},
		{IdentityID: bob.IdentityID, Name: "bob"},
	}
	if len(list.Identities) != len(want) {
		t.Fatalf("identities %s, want admin and bob", r.Body)
	}
	for i, w := range want {
		got := list.Identities[i]
		if got.IdentityID != w.IdentityID || got.Name != w.Name || got.Admin != w.Admin || got.CreatedAt == "" {
			t.Errorf("identity %d = %+v, want %+v", i, got, w)
		}
	}
	if bytes.Contains(r.Body, []byte(bob.APIKey)) || bytes.Contains(r.Body, []byte(`"apiKey"`)) {
		t.Errorf("the identity list carries a key: %s", r.Body)
	}
}

// The identity endpoints are the admin identity's only; others
// get 403 auth.forbidden, and a lane with no admin refuses everyone.
func TestIdentityEndpointsAreTheAdminsOnly(t *testing.T) {
	l := newTestLane(t)
	_, userKey := l.user("embedder-user") // lane.CreateIdentity: never an admin
	for _, c := range []struct{ method, body string }{{"POST", `{"name":"eve"}`}, {"GET", ""}} {
		lanetest.WantError(t, l.do(c.method, "/v1/identities", userKey, c.body), 403, "auth.forbidden", "admin")
	}
	_, adminKey := l.admin()
	bob := l.createIdentityHTTP(t, adminKey, "bob")
	for _, c := range []struct{ method, body string }{{"POST", `{"name":"eve"}`}, {"GET", ""}} {
		lanetest.WantError(t, l.do(c.method, "/v1/identities", bob.APIKey, c.body), 403, "auth.forbidden", "admin")
	}
	lanetest.WantError(t, l.do("GET", "/v1/identities", "", ""), 403, "auth.forbidden", "Bearer")
}

// The body of POST /v1/identities is closed; errors name the key.
func TestCreateIdentityBodyIsClosed(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	for _, c := range []struct {
		name, body, code, mentions string
	}{
		{"missing name", `{}`, "request.body_shape", `"name"`},
		{"unknown key", `{"name":"x","admin":"true"}`, "request.body_shape", `"admin"`},
		{"not a string", `{"name":7}`, "request.field_invalid", "name"},
		{"empty", `{"name":""}`, "request.field_invalid", "name"},
		{"control character", `{"name":"a\nb"}`, "request.field_invalid", "name"},
		{"too long", `{"name":"` + strings.Repeat("n", 256) + `"}`, "request.field_invalid", "255"},
		{"not JSON", `{`, "request.invalid_json", "JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lanetest.WantError(t, l.do("POST", "/v1/identities", adminKey, c.body), 400, c.code, c.mentions)
		})
	}
}

// POST /v1/api-keys → {"keyId","apiKey"} for the caller; GET
// lists the caller's keys with createdAt and lastUsedAt, never a key.
func TestAPIKeysAreCreatedAndListedForTheCaller(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	bob := l.createIdentityHTTP(t, adminKey, "bob")
	second := lanetest.Decode[api.CreateAPIKeyResponse](t, l.do("POST", "/v1/api-keys", bob.APIKey, ""))
	if !strings.HasPrefix(second.KeyID, "key_") || !strings.HasPrefix(second.APIKey, "sema_") || second.APIKey == bob.APIKey {
		t.Fatalf("created %+v", second)
	}
	lanetest.WantError(t, l.do("POST", "/v1/api-keys", bob.APIKey, `{"identityId":"x"}`), 400, "request.body_shape", `"identityId"`)
	r := l.do("GET", "/v1/api-keys", second.APIKey, "")
	list := lanetest.Decode[api.APIKeyList](t, r)
	// Oldest first: by creation time, then by id (two keys made in the
	// same millisecond are ordered by their ids' random parts).
	if len(list.APIKeys) != 2 || !slices.ContainsFunc(list.APIKeys, func(k api.APIKey) bool { return k.KeyID == second.KeyID }) {
		t.Fatalf("bob's keys %s, want two, one of them the new one", r.Body)
	}
	if a, b := list.APIKeys[0], list.APIKeys[1]; a.CreatedAt > b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.KeyID > b.KeyID) {
		t.Fatalf("bob's keys %s, want the oldest first", r.Body)
	}
	for _, k := range list.APIKeys {
		// Both keys have been used (the first made the list call's
		// predecessors, the second this one).
		if k.CreatedAt == "" || k.LastUsedAt == "" || k.RevokedAt != "" {
			t.Errorf("key %+v: want createdAt and lastUsedAt", k)
		}
	}
	if bytes.Contains(r.Body, []byte(bob.APIKey)) || bytes.Contains(r.Body, []byte(second.APIKey)) || bytes.Contains(r.Body, []byte(`"apiKey"`)) {
		t.Errorf("the key list carries a key: %s", r.Body)
	}
	if admins := lanetest.Decode[api.APIKeyList](t, l.do("GET", "/v1/api-keys", adminKey, "")); len(admins.APIKeys) != 1 {
		t.Errorf("the admin sees %d keys, want only its own one", len(admins.APIKeys))
	}
}

// "a revoked key is refused at once".
func TestARevokedKeyIsRefusedAtOnce(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	bob := l.createIdentityHTTP(t, adminKey, "bob")
	second := lanetest.Decode[api.CreateAPIKeyResponse](t, l.do("POST", "/v1/api-keys", bob.APIKey, ""))
	revoked := lanetest.Decode[api.APIKey](t, l.do("DELETE", "/v1/api-keys/"+second.KeyID, bob.APIKey, ""))
	if revoked.KeyID != second.KeyID || revoked.RevokedAt == "" {
		t.Fatalf("revoke answered %+v", revoked)
	}
	lanetest.WantError(t, l.do("GET", "/v1/devices", second.APIKey, ""), 403, "auth.forbidden", "not valid")
	if list := lanetest.Decode[api.APIKeyList](t, l.do("GET", "/v1/api-keys", bob.APIKey, "")); len(list.APIKeys) != 1 || list.APIKeys[0].KeyID == second.KeyID {
		t.Fatalf("bob's keys after the revoke: %+v", list.APIKeys)
	}
	// A second revoke is a no-op.
	if again := lanetest.Decode[api.APIKey](t, l.do("DELETE", "/v1/api-keys/"+second.KeyID, bob.APIKey, "")); again.RevokedAt != revoked.RevokedAt {
		t.Fatalf("a second revoke answered %+v, want %+v", again, revoked)
	}
	// A non-admin may revoke its last key (and is then locked out).
	keys := lanetest.Decode[api.APIKeyList](t, l.do("GET", "/v1/api-keys", bob.APIKey, ""))
	lanetest.Decode[api.APIKey](t, l.do("DELETE", "/v1/api-keys/"+keys.APIKeys[0].KeyID, bob.APIKey, ""))
	lanetest.WantError(t, l.do("GET", "/v1/devices", bob.APIKey, ""), 403, "auth.forbidden", "not valid")
}

// DELETE of another identity's key is 404 (not disclosed); the
// admin may revoke any identity's key.
func TestRevokingAnotherIdentitysKey(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	bob, carol := l.createIdentityHTTP(t, adminKey, "bob"), l.createIdentityHTTP(t, adminKey, "carol")
	bobKeys := lanetest.Decode[api.APIKeyList](t, l.do("GET", "/v1/api-keys", bob.APIKey, ""))
	keyID := bobKeys.APIKeys[0].KeyID
	unknown := l.do("DELETE", "/v1/api-keys/key_01J8ZQ4T9X0000000000000000", carol.APIKey, "")
	others := l.do("DELETE", "/v1/api-keys/"+keyID, carol.APIKey, "")
	lanetest.WantError(t, others, 404, "api_key.not_found", keyID)
	lanetest.WantError(t, unknown, 404, "api_key.not_found", "key_01J8ZQ4T9X0000000000000000")
	if r := l.do("GET", "/v1/devices", bob.APIKey, ""); r.Status != 200 {
		t.Fatalf("bob's key after carol's attempt: %d", r.Status)
	}
	lanetest.Decode[api.APIKey](t, l.do("DELETE", "/v1/api-keys/"+keyID, adminKey, ""))
	lanetest.WantError(t, l.do("GET", "/v1/devices", bob.APIKey, ""), 403, "auth.forbidden", "not valid")
}

// Revoking the admin's last key is refused with 409, so the lane
// is never without an admin key; with a second key it passes.
func TestTheAdminsLastKeyIsRefused(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	only := lanetest.Decode[api.APIKeyList](t, l.do("GET", "/v1/api-keys", adminKey, "")).APIKeys[0].KeyID
	lanetest.WantError(t, l.do("DELETE", "/v1/api-keys/"+only, adminKey, ""), 409, "api_key.last_admin_key", only)
	if r := l.do("GET", "/v1/identities", adminKey, ""); r.Status != 200 {
		t.Fatalf("the admin's key after the refusal: %d", r.Status)
	}
	second := lanetest.Decode[api.CreateAPIKeyResponse](t, l.do("POST", "/v1/api-keys", adminKey, ""))
	lanetest.Decode[api.APIKey](t, l.do("DELETE", "/v1/api-keys/"+only, second.APIKey, ""))
	lanetest.WantError(t, l.do("GET", "/v1/identities", adminKey, ""), 403, "auth.forbidden", "not valid")
}

// "every identity still sees only its own devices and
// instructions", also for identities created over HTTP.
func TestAnIdentitySeesOnlyItsOwnDevicesAndInstructions(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	bob := l.createIdentityHTTP(t, adminKey, "bob")
	tok := l.issueToken(bob.APIKey)
	dev := lanetest.Decode[api.EnrollResponse](t, l.do("POST", "/v1/devices/enroll", bob.APIKey, lanetest.EnrollBody(tok, lanetest.NewPubkey(t))))
	if list := lanetest.Decode[api.DeviceList](t, l.do("GET", "/v1/devices", adminKey, "")); len(list.Devices) != 0 {
		t.Fatalf("the admin sees bob's devices: %+v", list.Devices)
	}
	if list := lanetest.Decode[api.DeviceList](t, l.do("GET", "/v1/devices", bob.APIKey, "")); len(list.Devices) != 1 || list.Devices[0].DeviceID != dev.DeviceID {
		t.Fatalf("bob's devices: %+v", list.Devices)
	}
	body := `{"kind":"exec","args":{"command":"true"},"timeoutMs":1000}`
	lanetest.WantError(t, l.do("POST", "/v1/devices/"+dev.DeviceID+"/instructions", adminKey, body), 404, "device.not_found", dev.DeviceID)
	lanetest.WantError(t, l.do("POST", "/v1/devices/"+dev.DeviceID+"/revoke", adminKey, ""), 404, "device.not_found", dev.DeviceID)
}

// §1.1's row "token was issued to a different caller identity", end to
// end through the API: a second identity created over HTTP enrolling with
// the admin's token gets the byte-identical 403, audited
// token_wrong_identity.
func TestEnrollWithATokenIssuedToAnotherIdentity(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	bob := l.createIdentityHTTP(t, adminKey, "bob")
	adminsToken := l.issueToken(adminKey)
	r := l.do("POST", "/v1/devices/enroll", bob.APIKey, lanetest.EnrollBody(adminsToken, lanetest.NewPubkey(t)))
	if r.Status != 403 || !bytes.Equal(r.Body, enrollmentInvalidBody) {
		t.Fatalf("bob enrolling with the admin's token: %d %s, want 403 %s", r.Status, r.Body, enrollmentInvalidBody)
	}
	l.clock.Advance(time.Minute) // the refusal's audit window ends: its row is written
	rows := l.auditRows(store.AuditFilter{Event: string(lane.EventEnrollRefused)}, 1)
	if len(rows) != 1 || rows[0].Reason != string(store.RefusedWrongIdentity) || rows[0].IdentityID != bob.IdentityID {
		t.Fatalf("audit rows %+v, want one token_wrong_identity for bob", rows)
	}
	// The token was not consumed: its own identity still enrolls with it.
	if r := l.do("POST", "/v1/devices/enroll", adminKey, lanetest.EnrollBody(adminsToken, lanetest.NewPubkey(t))); r.Status != 200 {
		t.Fatalf("the admin enrolling with its own token afterwards: %d %s", r.Status, r.Body)
	}
}
