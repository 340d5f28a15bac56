package nexting

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The published vectors (testdata/*-v1.json, see testdata/NOTICE) are
// canonical behaviour: every valid frame must decode and re-encode to the
// same bytes, every invalid frame must be refused. Only wire bytes and
// verdicts are normative; the "decoded" members are the publication's
// JavaScript API shapes, compared here through an explicit translation
// (jsShape) as a check that each wire field lands in the right Go field.

type vectorFile struct {
	Spec          string           `json:"spec"`
	Wire          int              `json:"wire"`
	Profile       string           `json:"profile"`
	Valid         []validVector    `json:"valid"`
	Invalid       []jsontext.Value `json:"invalid"`
	InvalidCore   []invalidVector  `json:"invalidCore"`
	InvalidVendor []vendorVector   `json:"invalidVendor"`
}

type validVector struct {
	Name    string         `json:"name"`
	Wire    string         `json:"wire"`
	Decoded map[string]any `json:"decoded"`
}

type invalidVector struct {
	Name string `json:"name"`
	Wire string `json:"wire"`
	Code string `json:"code"` // optional expected error code
}

type vendorVector struct {
	Name   string         `json:"name"`
	Vendor jsontext.Value `json:"vendor"`
}

func loadVectors(t testing.TB) map[string]vectorFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*-v1.json"))
	if err != nil || len(paths) != 10 {
		t.Fatalf("want the 10 published vector files in testdata, got %d (%v)", len(paths), err)
	}
	out := map[string]vectorFile{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var vf vectorFile
		if err := json.Unmarshal(raw, &vf); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = vf
	}
	return out
}

// invalidCases normalizes the two published shapes of "invalid": a bare
// wire string, or {name, wire, code?}.
func invalidCases(t testing.TB, vf vectorFile) []invalidVector {
	var out []invalidVector
	for i, raw := range vf.Invalid {
		var iv invalidVector
		if raw.Kind() == '"' {
			if err := json.Unmarshal(raw, &iv.Wire); err != nil {
				t.Fatal(err)
			}
			iv.Name = "#" + string(rune('0'+i/10)) + string(rune('0'+i%10))
		} else if err := json.Unmarshal(raw, &iv); err != nil {
			t.Fatal(err)
		}
		out = append(out, iv)
	}
	return out
}

func TestVectorsMessages(t *testing.T) {
	seen := map[Type]bool{}
	for file, vf := range loadVectors(t) {
		if file == "device-info-v1.json" {
			continue
		}
		if vf.Wire != 1 || !Profile(vf.Profile).Known() {
			t.Errorf("%s: unexpected header wire=%d profile=%q", file, vf.Wire, vf.Profile)
		}
		for i, v := range vf.Valid {
			t.Run(file+"/valid/"+v.Name, func(t *testing.T) {
				m, err := DecodeFrame([]byte(v.Wire))
				if err != nil {
					t.Fatalf("valid vector %d refused: %v", i, err)
				}
				seen[m.Type()] = true
				if got := m.Type().Profile(); string(got) != vf.Profile {
					t.Errorf("type %s belongs to %s, file is %s", m.Type(), got, vf.Profile)
				}
				enc, err := Encode(m)
				if err != nil {
					t.Fatalf("re-encode: %v", err)
				}
				if string(enc) != v.Wire {
					t.Errorf("re-encoded frame differs\n got %s\nwant %s", enc, v.Wire)
				}
				if v.Decoded != nil {
					if got := jsShape(m); !reflect.DeepEqual(got, v.Decoded) {
						t.Errorf("decoded value differs\n got %#v\nwant %#v", got, v.Decoded)
					}
				}
			})
		}
		for _, v := range invalidCases(t, vf) {
			t.Run(file+"/invalid/"+v.Name, func(t *testing.T) {
				m, err := DecodeFrame([]byte(v.Wire))
				if err == nil {
					t.Fatalf("invalid vector accepted as %#v", m)
				}
				if v.Code != "" && string(CodeOf(err)) != v.Code {
					t.Errorf("code %s, vector says %s (%v)", CodeOf(err), v.Code, err)
				}
				if CodeOf(err) == "" {
					t.Errorf("error without a code: %v", err)
				}
			})
		}
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("no valid vector exercises %s", typ)
		}
	}
}

// TestVectorsExpectedCodes pins the code this package gives the published
// invalid frames whose fault has a specific code (the vectors give none).
func TestVectorsExpectedCodes(t *testing.T) {
	vf := loadVectors(t)["approval-v1.json"]
	for _, v := range invalidCases(t, vf) {
		_, err := DecodeFrame([]byte(v.Wire))
		want := CodeBadMessage
		switch {
		case len(v.Wire) > MaxFrameBytes:
			want = CodeMessageTooLarge
		case strings.HasPrefix(v.Wire, `{"v":2,`):
			want = CodeUnsupportedVersion
		}
		if got := CodeOf(err); got != want {
			t.Errorf("%s: code %s, want %s", v.Name, got, want)
		}
	}
}

func TestVectorsDeviceInfo(t *testing.T) {
	vf := loadVectors(t)["device-info-v1.json"]
	if len(vf.Valid) == 0 || len(vf.InvalidCore) == 0 || len(vf.InvalidVendor) == 0 {
		t.Fatal("device-info vectors missing a section")
	}
	for _, v := range vf.Valid {
		t.Run("valid/"+v.Name, func(t *testing.T) {
			info, err := ParseDeviceInfo([]byte(v.Wire))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if info.VendorErr != nil {
				t.Errorf("vendor dropped: %v", info.VendorErr)
			}
			if got := deviceInfoShape(info); !reflect.DeepEqual(got, v.Decoded) {
				t.Errorf("decoded differs\n got %#v\nwant %#v", got, v.Decoded)
			}
		})
	}
	for _, v := range vf.InvalidCore {
		t.Run("invalidCore/"+v.Name, func(t *testing.T) {
			if info, err := ParseDeviceInfo([]byte(v.Wire)); err == nil {
				t.Fatalf("accepted: %#v", info)
			} else if v.Code != "" && string(CodeOf(err)) != v.Code {
				t.Errorf("code %s, want %s", CodeOf(err), v.Code)
			}
		})
	}
	// An invalid vendor section is dropped; the rest stays valid. Each
	// vendor vector is placed into the first valid Device Info.
	base := vf.Valid[0].Wire
	for _, v := range vf.InvalidVendor {
		t.Run("invalidVendor/"+v.Name, func(t *testing.T) {
			wire := strings.TrimSuffix(base, "}") + `,"vendor":` + string(v.Vendor) + "}"
			info, err := ParseDeviceInfo([]byte(wire))
			if err != nil {
				t.Fatalf("core refused: %v", err)
			}
			if info.Vendor != nil || info.VendorErr == nil {
				t.Fatalf("vendor kept: %#v", info.Vendor)
			}
			if info.Model == "" || !info.Supports(ProfileApproval) {
				t.Errorf("core lost: %#v", info)
			}
		})
	}
}

// jsShape translates a message into the publication's JavaScript API shape
// (field names of its "decoded" members; numbers as float64, absent
// optional fields omitted, an error without id has requestId null).
func jsShape(m Message) map[string]any {
	f := func(n int64) float64 { return float64(n) }
	switch m := m.(type) {
	case Present:
		return map[string]any{"type": "present", "requestId": m.ID, "summary": m.Summary,
			"options": []any{"allow", "deny"}, "ttlMs": f(int64(m.TTLMillis))}
	case Answer:
		return map[string]any{"type": "answer", "requestId": m.ID, "choice": string(m.Choice)}
	case Resolved:
		return map[string]any{"type": "resolved", "requestId": m.ID, "reason": string(m.Reason)}
	case ErrorMessage:
		var id any
		if m.ID != "" {
			id = m.ID
		}
		return map[string]any{"type": "error", "requestId": id, "code": string(m.Code)}
	case Status:
		agents := []any{}
		for _, a := range m.Agents {
			x := map[string]any{"slot": f(int64(a.Slot)), "state": string(a.State)}
			if a.Label != "" {
				x["label"] = a.Label
			}
			agents = append(agents, x)
		}
		return map[string]any{"type": "status", "agents": agents}
	case NavPresent:
		items := []any{}
		for _, it := range m.Items {
			items = append(items, it)
		}
		return map[string]any{"type": "navPresent", "requestId": m.ID, "items": items,
			"cursor": f(int64(m.Cursor)), "ttlMs": f(int64(m.TTLMillis))}
	case NavMove:
		return map[string]any{"type": "navMove", "requestId": m.ID, "direction": string(m.Dir), "sequence": f(int64(m.Seq))}
	case NavSelect:
		return map[string]any{"type": "navSelect", "requestId": m.ID, "index": f(int64(m.Index)), "sequence": f(int64(m.Seq))}
	case NavResolved:
		return map[string]any{"type": "navResolved", "requestId": m.ID, "reason": string(m.Reason)}
	case Keymap:
		keys := []any{}
		for _, k := range m.Keys {
			x := map[string]any{"slot": f(int64(k.Slot)), "label": k.Label, "enabled": k.Enabled, "light": string(k.Light)}
			if k.RGB != nil {
				x["rgb"] = []any{f(int64(k.RGB[0])), f(int64(k.RGB[1])), f(int64(k.RGB[2]))}
			}
			keys = append(keys, x)
		}
		return map[string]any{"type": "keymap", "revision": f(int64(m.Rev)), "keys": keys}
	case KeyEvent:
		return map[string]any{"type": "keyEvent", "slot": f(int64(m.Slot)), "event": string(m.Event), "sequence": f(int64(m.Seq))}
	case RotaryMap:
		cs := []any{}
		for _, c := range m.Controls {
			cs = append(cs, map[string]any{"slot": f(int64(c.Slot)), "label": c.Label, "value": f(int64(c.Value)),
				"minimum": f(int64(c.Min)), "maximum": f(int64(c.Max)), "wrap": c.Wrap})
		}
		return map[string]any{"type": "rotaryMap", "revision": f(int64(m.Rev)), "controls": cs}
	case RotaryEvent:
		return map[string]any{"type": "rotaryEvent", "slot": f(int64(m.Slot)), "delta": f(int64(m.Delta)), "sequence": f(int64(m.Seq))}
	case RotaryPress:
		return map[string]any{"type": "rotaryPress", "slot": f(int64(m.Slot)), "event": string(m.Event), "sequence": f(int64(m.Seq))}
	case VoiceEvent:
		return map[string]any{"type": "voiceEvent", "event": string(m.Event), "sequence": f(int64(m.Seq))}
	case VoiceState:
		x := map[string]any{"type": "voiceState", "state": string(m.State)}
		if m.Label != "" {
			x["label"] = m.Label
		}
		return x
	case Text:
		x := map[string]any{"type": "text", "channel": f(int64(m.Channel)), "content": m.Content}
		if m.Title != "" {
			x["title"] = m.Title
		}
		return x
	case Usage:
		x := map[string]any{"type": "usage", "model": m.Model, "inputTokens": float64(m.InputTokens), "outputTokens": float64(m.OutputTokens)}
		if m.CachedTokens != nil {
			x["cachedTokens"] = float64(*m.CachedTokens)
		}
		if m.Context != nil {
			x["contextUsed"], x["contextLimit"] = float64(m.Context.Used), float64(m.Context.Limit)
		}
		return x
	case UsageClear:
		return map[string]any{"type": "usageClear"}
	case Config:
		es := []any{}
		for _, e := range m.Entries {
			var v any
			switch e.Value.Kind {
			case ConfigBool:
				v = e.Value.Bool
			case ConfigInt:
				v = f(int64(e.Value.Int))
			default:
				v = e.Value.Str
			}
			es = append(es, map[string]any{"key": e.Key, "value": v})
		}
		return map[string]any{"type": "config", "revision": f(int64(m.Rev)), "entries": es}
	case ConfigResult:
		x := map[string]any{"type": "configResult", "revision": f(int64(m.Rev)), "status": string(m.Status)}
		if m.Code != "" {
			x["code"] = string(m.Code)
		}
		return x
	}
	return nil
}

func deviceInfoShape(d *DeviceInfo) map[string]any {
	x := map[string]any{"model": d.Model, "statusSlots": float64(d.StatusSlots), "deviceId": nil,
		"buttonCount": nil, "batteryService": d.BatteryService, "vendorNamespace": nil}
	if d.DeviceID != "" {
		x["deviceId"] = d.DeviceID
	}
	if d.ButtonCount != nil {
		x["buttonCount"] = float64(*d.ButtonCount)
	}
	if d.Vendor != nil {
		x["vendorNamespace"] = d.Vendor.Namespace
	}
	return x
}

// TestTestdataIsSelfContained guards the rule that tests never read outside
// the package: the NOTICE travels with the copied vectors.
func TestTestdataIsSelfContained(t *testing.T) {
	notice, err := os.ReadFile(filepath.Join("testdata", "NOTICE"))
	if err != nil || !bytes.Contains(notice, []byte("Apache License 2.0")) {
		t.Fatalf("testdata/NOTICE missing or changed: %v", err)
	}
	if _, err := os.Stat(filepath.Join("testdata", "message.schema.json")); err != nil {
		t.Fatal(err)
	}
}
