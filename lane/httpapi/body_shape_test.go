package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
)

// The enroll body the server parses is api.EnrollRequest, the shape the
// device sends: its keys in order, required unless omitempty, and a body
// marshalled from it, full or with only the required keys, is accepted
// with every value as sent.
func TestTheEnrollBodyIsAPIEnrollRequest(t *testing.T) {
	want := []struct {
		name     string
		required bool
	}{{"token", true}, {"pubkey", true}, {"platformOs", true}, {"platformArch", false}, {"displayName", false}, {"workspaceRoot", true}}
	if len(enrollFields) != len(want) {
		t.Fatalf("%d enroll fields, want %d", len(enrollFields), len(want))
	}
	for i, w := range want {
		if f := enrollFields[i]; f.name != w.name || f.required != w.required || f.check == nil {
			t.Errorf("field %d: %q required=%v, want %q required=%v with a check", i, f.name, f.required, w.name, w.required)
		}
	}
	pub := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	for _, req := range []api.EnrollRequest{
		{Token: "set_x", Pubkey: pub, PlatformOS: "linux", PlatformArch: "amd64", DisplayName: "box", WorkspaceRoot: "/w"},
		{Token: "set_x", Pubkey: pub, PlatformOS: "darwin", WorkspaceRoot: "/w"},
	} {
		b, _ := json.Marshal(req)
		f, aerr := parseClosedBody(b, enrollFields, false)
		if aerr != nil {
			t.Fatalf("%s: %v", b, aerr.Message)
		}
		got := api.EnrollRequest{Token: f["token"], Pubkey: f["pubkey"], PlatformOS: f["platformOs"], PlatformArch: f["platformArch"],
			DisplayName: f["displayName"], WorkspaceRoot: f["workspaceRoot"]}
		if got != req {
			t.Errorf("%s parsed as %+v", b, got)
		}
	}
}

// A shape and its checks that do not name the same keys are refused when
// the package starts, naming the key.
func TestFieldsOfRefusesAMismatch(t *testing.T) {
	type shape struct {
		A string `json:"a"`
		B string `json:"b,omitempty"`
	}
	for what, checks := range map[string]map[string]func(string) string{
		`"b"`: {"a": maxBytes(1)},
		`"c"`: {"a": maxBytes(1), "b": maxBytes(1), "c": maxBytes(1)},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), what) {
					t.Errorf("fieldsOf with %d checks: %v; want a panic naming %s", len(checks), r, what)
				}
			}()
			fieldsOf[shape](checks)
		}()
	}
}
