package nexting

import (
	"fmt"
	"strings"
	"testing"
)

// Every Device Info bound at its edge and past it; want "" = accepted.
func TestDeviceInfoBounds(t *testing.T) {
	names := func(n, size int) string {
		return "[" + join(n, func(i int) string { return quoted(fmt.Sprintf("%0*d", size, i)) }) + "]"
	}
	profiles := func(extra int) string {
		return `["approval/1",` + join(extra, func(i int) string { return quoted(fmt.Sprintf("p/%d", i)) }) + "]"
	}
	cases := []struct {
		name   string
		fields []string
		want   Code
	}{
		{"required core", nil, ok},
		{"missing spec", []string{"spec", "-"}, CodeBadMessage},
		{"missing fw", []string{"fw", "-"}, CodeBadMessage},
		{"missing max_summary_bytes", []string{"max_summary_bytes", "-"}, CodeBadMessage},
		{"protocol case", []string{"protocol", `"Nexting-device"`}, CodeBadMessage},
		{"spec empty", []string{"spec", `""`}, CodeBadMessage},
		{"spec 64 bytes", []string{"spec", quoted(rep("s", 64))}, ok},
		{"spec 65 bytes", []string{"spec", quoted(rep("s", 65))}, CodeBadMessage},
		{"model 64 bytes", []string{"model", `"` + rep("é", 32) + `"`}, ok},
		{"model 66 bytes", []string{"model", `"` + rep("é", 33) + `"`}, CodeBadMessage},
		{"model control", []string{"model", `"a\u007fb"`}, CodeBadMessage},
		{"fw NUL", []string{"fw", `"1\u0000"`}, CodeBadMessage},
		{"wire 4 entries", []string{"wire", `[1,2,3,65535]`}, ok},
		{"wire 5 entries", []string{"wire", `[1,2,3,4,5]`}, CodeBadMessage},
		{"wire empty", []string{"wire", `[]`}, CodeBadMessage},
		{"wire 0", []string{"wire", `[1,0]`}, CodeBadMessage},
		{"wire 65536", []string{"wire", `[1,65536]`}, CodeBadMessage},
		{"wire duplicate", []string{"wire", `[1,1]`}, CodeBadMessage},
		{"wire without 1", []string{"wire", `[2,3]`}, CodeUnsupportedVersion},
		{"wire 1.0", []string{"wire", `[1.0]`}, CodeBadMessage},
		{"wire not array", []string{"wire", `1`}, CodeBadMessage},
		{"profiles 16", []string{"profiles", profiles(15)}, ok},
		{"profiles 17", []string{"profiles", profiles(16)}, CodeBadMessage},
		{"profiles duplicate", []string{"profiles", `["approval/1","approval/1"]`}, CodeBadMessage},
		{"profile name 32 bytes", []string{"profiles", `["approval/1",` + quoted(rep("p", 32)) + `]`}, ok},
		{"profile name 33 bytes", []string{"profiles", `["approval/1",` + quoted(rep("p", 33)) + `]`}, CodeBadMessage},
		{"profiles without approval/1", []string{"profiles", `["approval/2"]`}, CodeUnsupportedProfile},
		{"max_message_bytes 511", []string{"max_message_bytes", "511"}, CodeBadMessage},
		{"max_message_bytes 512", []string{"max_message_bytes", "512"}, ok},
		{"max_message_bytes 4294967295", []string{"max_message_bytes", "4294967295"}, ok},
		{"max_message_bytes 4294967296", []string{"max_message_bytes", "4294967296"}, CodeBadMessage},
		{"max_message_bytes 4096.0", []string{"max_message_bytes", "4096.0"}, CodeBadMessage},
		{"max_message_bytes 4e3", []string{"max_message_bytes", "4e3"}, CodeBadMessage},
		{"max_summary_bytes 0", []string{"max_summary_bytes", "0"}, CodeBadMessage},
		{"max_summary_bytes 1", []string{"max_summary_bytes", "1"}, ok},
		{"max_summary_bytes 241", []string{"max_summary_bytes", "241"}, CodeBadMessage},
		{"statusSlots 8", []string{"profiles", `["approval/1","status/1"]`, "statusSlots", "8"}, ok},
		{"statusSlots 9", []string{"profiles", `["approval/1","status/1"]`, "statusSlots", "9"}, CodeBadMessage},
		{"statusSlots -1", []string{"statusSlots", "-1"}, CodeBadMessage},
		{"statusSlots 0 without status/1", []string{"statusSlots", "0"}, ok},
		{"device_id lower", []string{"device_id", `"5cc0a66e-a204-4c33-a3ef-b2b352a35489"`}, ok},
		{"device_id upper", []string{"device_id", `"5CC0A66E-A204-4C33-A3EF-B2B352A35489"`}, ok},
		{"device_id version 6", []string{"device_id", `"5cc0a66e-a204-6c33-a3ef-b2b352a35489"`}, CodeBadMessage},
		{"device_id variant c", []string{"device_id", `"5cc0a66e-a204-4c33-c3ef-b2b352a35489"`}, CodeBadMessage},
		{"device_id braces", []string{"device_id", `"{5cc0a66e-a204-4c33-a3ef-b2b352a35489}"`}, CodeBadMessage},
		{"device_id empty", []string{"device_id", `""`}, CodeBadMessage},
		{"manufacturer 64", []string{"manufacturer", quoted(rep("m", 64))}, ok},
		{"manufacturer 65", []string{"manufacturer", quoted(rep("m", 65))}, CodeBadMessage},
		{"serial_number control", []string{"serial_number", `"a\tb"`}, CodeBadMessage},
		{"display_name empty", []string{"display_name", `""`}, CodeBadMessage},
		{"button_count 1024", []string{"button_count", "1024"}, ok},
		{"button_count 1025", []string{"button_count", "1025"}, CodeBadMessage},
		{"approval buttons = total", []string{"button_count", "2", "approval_button_count", "2"}, ok},
		{"approval buttons > total", []string{"button_count", "2", "approval_button_count", "3"}, CodeBadMessage},
		{"custom buttons > total", []string{"button_count", "2", "custom_button_count", "3"}, CodeBadMessage},
		{"specialised count without total", []string{"custom_button_count", "1024"}, ok},
		{"custom_button_count 1025", []string{"custom_button_count", "1025"}, CodeBadMessage},
		{"rotary_count 64", []string{"rotary_count", "64", "rotary_press_count", "64"}, ok},
		{"rotary_count 65", []string{"rotary_count", "65"}, CodeBadMessage},
		{"rotary press > total", []string{"rotary_count", "1", "rotary_press_count", "2"}, CodeBadMessage},
		{"rotary_press_count 65", []string{"rotary_press_count", "65"}, CodeBadMessage},
		{"battery_service string", []string{"battery_service", `"yes"`}, CodeBadMessage},
		{"display at bounds", []string{"display", `{"type":"` + rep("t", 32) + `","width":4096,"height":1}`}, ok},
		{"display type 33", []string{"display", `{"type":"` + rep("t", 33) + `","width":1,"height":1}`}, CodeBadMessage},
		{"display width 0", []string{"display", `{"type":"oled","width":0,"height":1}`}, CodeBadMessage},
		{"display height 4097", []string{"display", `{"type":"oled","width":1,"height":4097}`}, CodeBadMessage},
		{"display missing height", []string{"display", `{"type":"oled","width":1}`}, CodeBadMessage},
		{"display unknown field", []string{"display", `{"type":"oled","width":1,"height":1,"depth":16}`}, ok},
		{"display not object", []string{"display", `"oled"`}, CodeBadMessage},
		{"haptics 8", []string{"haptics", names(8, 2)}, ok},
		{"haptics 9", []string{"haptics", names(9, 2)}, CodeBadMessage},
		{"haptics empty", []string{"haptics", `[]`}, CodeBadMessage},
		{"haptics duplicate", []string{"haptics", `["a","a"]`}, CodeBadMessage},
		{"haptic name 32", []string{"haptics", names(1, 32)}, ok},
		{"haptic name 33", []string{"haptics", names(1, 33)}, CodeBadMessage},
		{"unknown field ignored", []string{"future", `{"a":[1.5,null,"x"]}`}, ok},
		{"unknown field 8 levels", []string{"future", nested(8, "")}, ok},
		{"unknown field 9 levels", []string{"future", nested(9, "")}, CodeBadMessage},
		{"unknown field with NUL", []string{"future", `"\u0000"`}, CodeBadMessage},
		{"duplicate known field", []string{"x", `1,"model":"n"`}, CodeBadMessage},
		{"duplicate via escape", []string{"x", `1,"\u006dodel":"n"`}, CodeBadMessage},
		{"duplicate inside display", []string{"display", `{"type":"a","width":1,"height":1,"w\u0069dth":2}`}, CodeBadMessage},
		{"duplicate unknown field", []string{"x", `1,"x":2`}, CodeBadMessage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wire := devInfo(c.fields...)
			_, err := ParseDeviceInfo([]byte(wire))
			if CodeOf(err) != c.want {
				t.Fatalf("got %v, want %q\n%s", err, c.want, wire)
			}
		})
	}
}

func TestDeviceInfoWholeValue(t *testing.T) {
	pad := func(total int) []byte {
		base := devInfo("pad", `""`)
		return []byte(devInfo("pad", quoted(rep("x", total-len(base)))))
	}
	if b := pad(4096); len(b) != 4096 {
		t.Fatal("helper")
	} else if _, err := ParseDeviceInfo(b); err != nil {
		t.Errorf("4096 bytes: %v", err)
	}
	if _, err := ParseDeviceInfo(pad(4097)); CodeOf(err) != CodeMessageTooLarge {
		t.Errorf("4097 bytes: %v", err)
	}
	for name, in := range map[string]string{
		"invalid UTF-8": strings.Replace(devInfo(), `"m"`, "\"\xff\"", 1),
		"array":         `[1]`,
		"trailing data": devInfo() + `x`,
		"empty":         ``,
	} {
		if _, err := ParseDeviceInfo([]byte(in)); CodeOf(err) != CodeBadMessage {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Insignificant whitespace is allowed in Device Info (not framed).
	pretty := "{\n  \"protocol\": \"nexting-device\",\n  \"spec\": \"0.2.0\",\n  \"wire\": [1],\n  \"profiles\": [\"approval/1\"],\n" +
		"  \"model\": \"m\",\n  \"fw\": \"1\",\n  \"max_message_bytes\": 512,\n  \"max_summary_bytes\": 1,\n" +
		"  \"vendor\": {\n    \"namespace\": \"com.example.pad\",\n    \"facts\": [ { \"key\": \"k\", \"label\": \"L\", \"value\": 4 } ]\n  }\n}\n"
	info, err := ParseDeviceInfo([]byte(pretty))
	if err != nil {
		t.Fatal(err)
	}
	if info.Vendor == nil || info.Vendor.Facts[0].Value != "4" || !info.Vendor.Facts[0].Integer {
		t.Errorf("pretty vendor: %#v %v", info.Vendor, info.VendorErr)
	}
}

func TestDeviceInfoFields(t *testing.T) {
	vf := loadVectors(t)["device-info-v1.json"]
	info, err := ParseDeviceInfo([]byte(vf.Valid[1].Wire)) // complete extensible macropad
	if err != nil {
		t.Fatal(err)
	}
	if info.Spec != "0.2.0-experimental.2" || info.FW != "0.2.0" || info.MaxMessageBytes != 4096 ||
		info.MaxSummaryBytes != 240 || info.Manufacturer != "ILX" || info.DisplayName != "Desk Controller" ||
		info.SerialNumber != "MP-0007" || *info.ApprovalButtonCount != 2 || *info.CustomButtonCount != 10 ||
		*info.RotaryCount != 2 || *info.RotaryPressCount != 2 || info.Display == nil ||
		*info.Display != (Display{Type: "oled", Width: 128, Height: 64}) || len(info.Haptics) != 2 ||
		len(info.Vendor.Facts) != 2 || info.Vendor.Facts[1].Value != "Kailh hot-swap" || !info.Supports(ProfileStatus) {
		t.Errorf("fields: %#v", info)
	}
}

// Vendor sections: each rule, valid at its edge, dropped past it — never
// rejecting the rest of Device Info.
func TestVendorBounds(t *testing.T) {
	fact := func(i int) string { return fmt.Sprintf(`{"key":"k%d","label":"L","value":"v"}`, i) }
	vendor := func(ns, facts string) string { return `{"namespace":` + ns + `,"facts":[` + facts + `]}` }
	cases := []struct {
		name   string
		vendor string
		valid  bool
	}{
		{"one fact", vendor(`"com.example"`, fact(0)), true},
		{"16 facts", vendor(`"com.example"`, join(16, fact)), true},
		{"17 facts", vendor(`"com.example"`, join(17, fact)), false},
		{"no facts", vendor(`"com.example"`, ""), false},
		{"namespace 128", vendor(quoted(rep("a", 63)+"."+rep("b", 62)+".c"), fact(0)), true},
		{"namespace 129", vendor(quoted(rep("a", 63)+"."+rep("b", 63)+".c"), fact(0)), false},
		{"namespace label 64", vendor(quoted(rep("a", 64)+".com"), fact(0)), false},
		{"namespace single label", vendor(`"example"`, fact(0)), false},
		{"namespace upper case", vendor(`"com.Example"`, fact(0)), false},
		{"namespace empty label", vendor(`"com..example"`, fact(0)), false},
		{"namespace leading hyphen", vendor(`"-com.example"`, fact(0)), false},
		{"key 32", vendor(`"com.example"`, `{"key":"`+rep("k", 32)+`","label":"L","value":"v"}`), true},
		{"key 33", vendor(`"com.example"`, `{"key":"`+rep("k", 33)+`","label":"L","value":"v"}`), false},
		{"key with space", vendor(`"com.example"`, `{"key":"a b","label":"L","value":"v"}`), false},
		{"duplicate key", vendor(`"com.example"`, fact(1)+","+fact(1)), false},
		{"label 64", vendor(`"com.example"`, `{"key":"k","label":"`+rep("l", 64)+`","value":"v"}`), true},
		{"label 65", vendor(`"com.example"`, `{"key":"k","label":"`+rep("l", 65)+`","value":"v"}`), false},
		{"label markdown", vendor(`"com.example"`, `{"key":"k","label":"**bold**","value":"v"}`), false},
		{"value 128", vendor(`"com.example"`, `{"key":"k","label":"L","value":"`+rep("v", 128)+`"}`), true},
		{"value 129", vendor(`"com.example"`, `{"key":"k","label":"L","value":"`+rep("v", 129)+`"}`), false},
		{"value empty", vendor(`"com.example"`, `{"key":"k","label":"L","value":""}`), false},
		{"value integer", vendor(`"com.example"`, `{"key":"k","label":"L","value":-42}`), true},
		{"value max safe integer", vendor(`"com.example"`, `{"key":"k","label":"L","value":9007199254740991}`), true},
		{"value unsafe integer", vendor(`"com.example"`, `{"key":"k","label":"L","value":9007199254740992}`), false},
		{"value float", vendor(`"com.example"`, `{"key":"k","label":"L","value":1.5}`), false},
		{"value boolean", vendor(`"com.example"`, `{"key":"k","label":"L","value":true}`), false},
		{"value html", vendor(`"com.example"`, `{"key":"k","label":"L","value":"<script>x</script>"}`), false},
		{"value link", vendor(`"com.example"`, `{"key":"k","label":"L","value":"ftp://x"}`), false},
		{"value www", vendor(`"com.example"`, `{"key":"k","label":"L","value":"WWW.example.com"}`), false},
		{"value javascript", vendor(`"com.example"`, `{"key":"k","label":"L","value":"JavaScript:alert"}`), false},
		{"value control", vendor(`"com.example"`, `{"key":"k","label":"L","value":"a\nb"}`), false},
		{"vendor not object", `"com.example"`, false},
		{"facts not array", `{"namespace":"com.example","facts":{}}`, false},
		{"fact unknown field ignored", vendor(`"com.example"`, `{"key":"k","label":"L","value":"v","icon":"x"}`), true},
		{"over 1024 bytes", vendor(`"com.example"`, join(8, func(i int) string {
			return fmt.Sprintf(`{"key":"k%d","label":"L","value":"%s"}`, i, rep("v", 100))
		})), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, err := ParseDeviceInfo([]byte(devInfo("vendor", c.vendor)))
			if err != nil {
				t.Fatalf("Device Info rejected: %v", err)
			}
			if (info.Vendor != nil) != c.valid || (info.VendorErr == nil) != c.valid {
				t.Fatalf("vendor %#v err %v, want valid=%v", info.Vendor, info.VendorErr, c.valid)
			}
		})
	}
	// Exactly 1024 encoded bytes is allowed, 1025 is not, measured on the
	// compact encoding even when the section arrives pretty-printed.
	sized := func(total int) string {
		values := make([]int, 9)
		base := len(vendor(`"com.example"`, join(9, func(i int) string { return fmt.Sprintf(`{"key":"k%d","label":"L","value":"v"}`, i) })))
		pad := total - base
		for i := range values {
			values[i] = 1 + min(pad, 127)
			pad -= values[i] - 1
		}
		return vendor(`"com.example"`, join(9, func(i int) string {
			return fmt.Sprintf(`{"key":"k%d","label":"L","value":"%s"}`, i, rep("v", values[i]))
		}))
	}
	for total, valid := range map[int]bool{1024: true, 1025: false} {
		v := sized(total)
		if len(v) != total {
			t.Fatalf("helper: %d", len(v))
		}
		for _, form := range []string{v, strings.ReplaceAll(v, ",", ", ")} {
			info, err := ParseDeviceInfo([]byte(devInfo("vendor", form)))
			if err != nil || (info.Vendor != nil) != valid {
				t.Errorf("%d-byte vendor: %v %v", total, err, info.VendorErr)
			}
		}
	}
}
