package httpapi

import (
	"encoding/json"
	"maps"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane"
)

// The request bodies of the identity endpoints (POST /v1/identities, POST /v1/api-keys,
// POST /v1/sessions/{id}/rebind) and the rootSessionId of §9: whatever the
// input, a body is refused with a 400 of the closed set, or accepted with
// only its known keys, every required one, each passing its check, and
// the same map again after a round trip; an accepted rootSessionId is
// bounded, valid UTF-8 and free of control characters.
func FuzzIdentityAndSessionInput(f *testing.F) {
	for _, seed := range []string{
		`{"name":"bob"}`, `{"name":""}`, `{"deviceId":"dev_01J8ZQ4T9X0000000000000000"}`, `{}`, ``, ` `,
		`{"name":"a","name":"b"}`, `[1]`, `{"name":"\u0000"}`, `{"name":7}`, `{"name":"bob","admin":"true"}`, `{`,
	} {
		f.Add([]byte(seed), "rs_1")
	}
	f.Add([]byte(`{"name":"x"}`), "a\x07b")
	f.Add([]byte(`{"name":"x"}`), "\xff")
	bodies := []struct {
		fields     []bodyField
		allowEmpty bool
	}{{identityFields, false}, {rebindFields, false}, {nil, true}}
	codes := map[string]bool{api.CodeInvalidJSON: true, api.CodeBodyShape: true, api.CodeFieldInvalid: true}
	f.Fuzz(func(t *testing.T, body []byte, rootSessionID string) {
		for _, b := range bodies {
			got, aerr := parseClosedBody(body, b.fields, b.allowEmpty)
			if aerr != nil {
				if aerr.Status != 400 || !codes[aerr.Code] || aerr.Message == "" {
					t.Fatalf("%q refused with %d %s %q", body, aerr.Status, aerr.Code, aerr.Message)
				}
				continue
			}
			for _, field := range b.fields {
				v, ok := got[field.name]
				if field.required && !ok {
					t.Fatalf("%q accepted without %q", body, field.name)
				}
				if ok && field.check != nil && field.check(v) != "" {
					t.Fatalf("%q accepted with %s %q, which its check refuses", body, field.name, v)
				}
			}
			if len(got) > len(b.fields) {
				t.Fatalf("%q accepted with unknown keys: %v", body, got)
			}
			again, _ := json.Marshal(got)
			if back, aerr := parseClosedBody(again, b.fields, b.allowEmpty); aerr != nil || !maps.Equal(back, got) {
				t.Fatalf("%q: the round trip %s gives %v, %v", body, again, back, aerr)
			}
		}
		if lane.CheckRootSessionID(rootSessionID) == "" {
			if len(rootSessionID) > lane.MaxRootSessionID || !utf8.ValidString(rootSessionID) {
				t.Fatalf("rootSessionId %q accepted", rootSessionID)
			}
			for _, r := range rootSessionID {
				if unicode.IsControl(r) {
					t.Fatalf("rootSessionId %q with a control character accepted", rootSessionID)
				}
			}
		}
	})
}
