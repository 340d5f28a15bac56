package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
)

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
	if err := json.Unmarshal(r.Body, &got); err != nil || r.Status != 200 {
		t.Fatalf("capabilities: %d %s %v", r.Status, r.Body, err)
	}
	de := got.DeviceExecutor
	if !de.Enabled || de.ProtocolVersion != 1 || de.MaxInflightPerDevice != 4 || de.WSPath != "/v1/device/ws" || de.Management["enroll"] != "/v1/devices/enroll" || de.Management["mcp"] != "/v1/mcp" || de.Management["sessions"] != "/v1/sessions" || de.Management["apiKeys"] != "/v1/api-keys" {
		t.Fatalf("capabilities = %s", r.Body)
	}
	off := newTestLane(t, func(c *lane.Config) { c.Disabled = true })
	if r := off.do("GET", "/v1/capabilities", "", ""); string(r.Body) != `{"deviceExecutor":false}` {
		t.Fatalf("capabilities with the lane off = %s, want {\"deviceExecutor\":false}", r.Body)
	}
}

// enroll enrolls a new device of the caller's and returns its id.
func (l *testLane) enroll(apiKey string) string {
	l.t.Helper()
	r := l.do("POST", "/v1/devices/enroll", apiKey, lanetest.EnrollBody(l.issueToken(apiKey), lanetest.NewPubkey(l.t)))
	return r.JSON(l.t)["deviceId"].(string)
}

// A device is renamed by its owner only; the body is closed and the name
// bounded as enrollment bounds it.
func TestADeviceIsRenamedByItsOwnerOnly(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	_, bobKey := l.user("bob")
	mine, bobs := l.enroll(key), l.enroll(bobKey)
	rename := func(k, id, body string) lanetest.Response {
		return l.do("POST", "/v1/devices/"+id+"/rename", k, body)
	}
	lanetest.WantError(t, rename(key, bobs, `{"displayName":"mine now"}`), 404, "device.not_found", bobs)
	lanetest.WantError(t, rename(key, mine, `{}`), 400, "request.body_shape", "displayName")
	lanetest.WantError(t, rename(key, mine, `{"displayName":""}`), 400, "request.field_invalid", "displayName")
	lanetest.WantError(t, rename(key, mine, `{"displayName":"`+strings.Repeat("x", 256)+`"}`), 400, "request.field_invalid", "displayName")
	lanetest.WantError(t, rename(key, mine, `{"displayName":"a","name":"b"}`), 400, "request.body_shape", "name")
	r := rename(key, mine, `{"displayName":"laptop"}`)
	if r.Status != 200 || r.JSON(t)["displayName"] != "laptop" || r.JSON(t)["deviceId"] != mine {
		t.Fatalf("rename: %d %s", r.Status, r.Body)
	}
	if d, _ := l.store.Device(t.Context(), bobs); d.DisplayName == "mine now" {
		t.Fatal("bob's device was renamed by alice")
	}
	if rows := l.auditRows(store.AuditFilter{DeviceID: mine, Event: string(lane.EventRenamed)}, 1); len(rows) != 1 {
		t.Fatalf("%d rename audit rows, want 1", len(rows))
	}
}

// Only a revoked device is forgotten: by its owner, or by the admin; its
// row goes, its audit rows stay.
func TestOnlyARevokedDeviceIsForgotten(t *testing.T) {
	l := newTestLane(t)
	_, adminKey := l.admin()
	_, key := l.user("alice")
	_, bobKey := l.user("bob")
	mine, bobs := l.enroll(key), l.enroll(bobKey)
	forget := func(k, id string) lanetest.Response { return l.do("POST", "/v1/devices/"+id+"/forget", k, "") }

	lanetest.WantError(t, forget(key, mine), 409, "device.not_revoked", mine)
	l.do("POST", "/v1/devices/"+mine+"/revoke", key, "")
	l.do("POST", "/v1/devices/"+bobs+"/revoke", bobKey, "")
	lanetest.WantError(t, forget(key, bobs), 404, "device.not_found", bobs)
	lanetest.WantError(t, l.do("POST", "/v1/devices/"+mine+"/forget", key, `{"x":1}`), 400, "request.body_shape", "x")
	if r := forget(key, mine); r.Status != 200 || r.JSON(t)["deviceId"] != mine || r.JSON(t)["revoked"] != true {
		t.Fatalf("forget: %d %s", r.Status, r.Body)
	}
	if r := l.do("GET", "/v1/devices", key, ""); strings.Contains(string(r.Body), mine) {
		t.Fatalf("the forgotten device is still listed: %s", r.Body)
	}
	lanetest.WantError(t, forget(key, mine), 404, "device.not_found", mine)
	if r := forget(adminKey, bobs); r.Status != 200 {
		t.Fatalf("the admin forgetting bob's revoked device: %d %s", r.Status, r.Body)
	}
	if rows := l.auditRows(store.AuditFilter{DeviceID: mine, Event: string(lane.EventRevoked)}, 1); len(rows) != 1 {
		t.Errorf("%d revoke audit rows after forget, want 1 (audit stays)", len(rows))
	}
	if rows := l.auditRows(store.AuditFilter{DeviceID: bobs, Event: string(lane.EventForgotten)}, 1); len(rows) != 1 {
		t.Errorf("%d forget audit rows of bob's device, want 1", len(rows))
	}
}

func TestDevicesListAndRevoke(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("alice")
	_, bobKey := l.user("bob")
	mine, bobs := l.enroll(key), l.enroll(bobKey)
	var list struct {
		Devices []api.Device `json:"devices"`
	}
	json.Unmarshal(l.do("GET", "/v1/devices", key, "").Body, &list)
	if len(list.Devices) != 1 || list.Devices[0].DeviceID != mine || list.Devices[0].Revoked {
		t.Fatalf("alice's devices = %+v", list.Devices)
	}
	lanetest.WantError(t, l.do("POST", "/v1/devices/"+bobs+"/revoke", key, ""), 404, "device.not_found", bobs)
	r := l.do("POST", "/v1/devices/"+mine+"/revoke", key, "")
	if r.Status != 200 || r.JSON(t)["revoked"] != true {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	if r2 := l.do("POST", "/v1/devices/"+mine+"/revoke", key, ""); r2.Status != 200 || r2.JSON(t)["revokedAt"] != r.JSON(t)["revokedAt"] {
		t.Fatalf("a second revoke changed the revocation: %s then %s", r.Body, r2.Body)
	}
	if d, _ := l.store.Device(t.Context(), bobs); d.Revoked() {
		t.Fatal("bob's device was revoked")
	}
	rows := l.auditRows(store.AuditFilter{DeviceID: mine, Event: string(lane.EventRevoked)}, 2)
	if len(rows) != 2 {
		t.Fatalf("%d revoke audit rows, want 2", len(rows))
	}
	json.Unmarshal(l.do("GET", "/v1/devices", key, "").Body, &list)
	if !list.Devices[0].Revoked || list.Devices[0].RevokedAt == "" {
		t.Fatalf("after revoke: %+v", list.Devices[0])
	}
}
