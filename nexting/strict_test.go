package nexting

import (
	"strings"
	"testing"
)

// Duplicate names are refused at every depth, also when one spelling uses
// JSON escapes (short spec §1: "duplicate known keys at every nesting
// level, including equivalent JSON escapes"; a published reference only
// checks the top level). Duplicate unknown names are refused too.
func TestDuplicateNamesAtEveryDepth(t *testing.T) {
	spellings := []struct{ a, b string }{
		{`"t"`, `"t"`},
		{`"t"`, `"\u0074"`},
		{`"\u0074"`, `"\u0074"`},
		{`"slot"`, `"\u0073lot"`},
		{`"slot"`, `"s\u006cot"`},
		{`"slot"`, `"\u0073\u006C\u006f\u0074"`}, // mixed-case hex
		{`"a/b"`, `"a\/b"`},                      // escaped solidus
		{`"é"`, `"\u00e9"`},                      // non-ASCII vs escape
		{`"😀"`, `"\ud83d\ude00"`},                // surrogate pair vs raw
	}
	for _, s := range spellings {
		name := strings.Trim(s.a, `"`)
		key := s.a
		// The duplicate pair at depth 1 (top level), 2, 3 and 4..8 below the
		// message, in known and in unknown objects.
		cases := map[string]string{
			"top level":            `{"v":1,"t":"answer","id":"r","ch":"allow",` + key + `:1,` + s.b + `:2}`,
			"depth 1 unknown obj":  `{"v":1,"t":"answer","id":"r","ch":"allow","x":{` + key + `:1,` + s.b + `:2}}`,
			"depth 2 status agent": `{"v":1,"t":"status","agents":[{"slot":0,"state":"idle",` + key + `:1,` + s.b + `:2}]}`,
			"depth 2 keymap key":   `{"v":1,"t":"keymap","rev":1,"keys":[{"slot":0,"label":"k","enabled":true,"light":"off",` + key + `:1,` + s.b + `:2}]}`,
			"depth 4":              `{"v":1,"t":"answer","id":"r","ch":"allow","x":[{"y":[{` + key + `:1,` + s.b + `:2}]}]}`,
			"depth 8":              `{"v":1,"t":"answer","id":"r","ch":"allow","x":` + nested(7, `{`+key+`:1,`+s.b+`:2}`) + `}`,
		}
		for where, frame := range cases {
			t.Run(name+"/"+where, func(t *testing.T) {
				_, err := Decode([]byte(frame))
				if CodeOf(err) != CodeBadMessage {
					t.Fatalf("got %v, want bad_message\n%s", err, frame)
				}
			})
		}
	}
	// Known envelope fields with escapes, each repeated.
	for _, frame := range []string{
		`{"v":1,"\u0076":1,"t":"answer","id":"r","ch":"allow"}`,
		`{"v":1,"t":"answer","\u0074":"answer","id":"r","ch":"allow"}`,
		`{"v":1,"t":"answer","id":"r","\u0069\u0064":"r2","ch":"allow"}`,
		`{"v":1,"t":"answer","id":"r","ch":"allow","c\u0068":"deny"}`,
		`{"v":1,"t":"status","agents":[{"slot":0,"\u0073lot":1,"state":"idle"}]}`,
		`{"v":1,"t":"config","rev":1,"entries":[{"key":"a","k\u0065y":"b","value":1}]}`,
		`{"v":1,"t":"usage","model":"m","input_tokens":1,"output_tokens":2,"output\u005ftokens":3}`,
	} {
		if _, err := Decode([]byte(frame)); CodeOf(err) != CodeBadMessage {
			t.Errorf("accepted or wrong code (%v): %s", err, frame)
		}
	}
	// The same name in two sibling objects is not a duplicate.
	runFrameCases(t, []frameCase{
		{"siblings", `{"v":1,"t":"status","agents":[{"slot":0,"state":"idle"},{"slot":1,"state":"idle"}]}`, ok},
		{"parent and child", `{"v":1,"t":"answer","id":"r","ch":"allow","x":{"id":{"id":1}}}`, ok},
	})
}

// A decoded U+0000 is refused in every string, names included, however it
// is spelled; an escaped backslash before "u0000" is not a NUL.
func TestNULRefusedEverywhere(t *testing.T) {
	runFrameCases(t, []frameCase{
		{"in a known string", `{"v":1,"t":"answer","id":"r","ch":"allow\u0000"}`, CodeBadMessage},
		{"in an unknown string", `{"v":1,"t":"answer","id":"r","ch":"allow","x":"\u0000"}`, CodeBadMessage},
		{"in an unknown name", `{"v":1,"t":"answer","id":"r","ch":"allow","\u0000":1}`, CodeBadMessage},
		{"deep in an unknown value", `{"v":1,"t":"answer","id":"r","ch":"allow","x":[[{"y":["\u0000"]}]]}`, CodeBadMessage},
		{"in a status label", `{"v":1,"t":"status","agents":[{"slot":0,"state":"idle","label":"a\u0000"}]}`, CodeBadMessage},
		{"in text content", `{"v":1,"t":"text","channel":0,"content":"\u0000"}`, CodeBadMessage},
		{"escaped backslash then u0000", `{"v":1,"t":"present","id":"r","sum":"\\u0000","opt":["allow","deny"],"ttl":1}`, ok},
	})
}

// Encoding refuses what decoding refuses, so nothing invalid reaches the
// wire, and encoding is canonical: escapes in the input are not kept.
func TestEncodeRefusesInvalid(t *testing.T) {
	for name, m := range map[string]Message{
		"present bad id":         Present{ID: "a b", TTLMillis: 1},
		"present zero ttl":       Present{ID: "r"},
		"present NUL":            Present{ID: "r", Summary: "a\x00", TTLMillis: 1},
		"present bad UTF-8":      Present{ID: "r", Summary: "\xff", TTLMillis: 1},
		"answer bad choice":      Answer{ID: "r", Choice: "maybe"},
		"error bad code":         ErrorMessage{Code: "nope"},
		"status dup slot":        Status{Agents: []Agent{{Slot: 1, State: AgentIdle}, {Slot: 1, State: AgentIdle}}},
		"status slot 8":          Status{Agents: []Agent{{Slot: 8, State: AgentIdle}}},
		"nav cursor":             NavPresent{ID: "q", Items: []string{"a", "b"}, Cursor: 2, TTLMillis: 1},
		"keymap no label":        Keymap{Keys: []Key{{Slot: 0, Light: LightOff}}},
		"rotary zero delta":      RotaryEvent{Slot: 0},
		"text CR":                Text{Content: "\r"},
		"usage over safe":        Usage{Model: "m", InputTokens: 1 << 53},
		"usage context":          Usage{Model: "m", Context: &ContextUsage{Used: 2, Limit: 1}},
		"config zero value":      Config{Entries: []ConfigEntry{{Key: "a"}}},
		"config dup key":         Config{Entries: []ConfigEntry{{Key: "a", Value: BoolValue(true)}, {Key: "a", Value: BoolValue(true)}}},
		"config_result no code":  ConfigResult{Status: ConfigRejected},
		"config_result app+code": ConfigResult{Status: ConfigApplied, Code: ConfigUnsupported},
		"voice bad phase":        VoiceState{State: "recording"},
		"nil":                    nil,
	} {
		if b, err := Encode(m); err == nil {
			t.Errorf("%s: encoded %s", name, b)
		} else if CodeOf(err) != CodeBadMessage {
			t.Errorf("%s: %v", name, err)
		}
	}
	m, err := Decode([]byte(`{"v":1,"t":"present","id":"r","sum":"\u00e9\/\"\u0007","opt":["\u0061llow","deny"],"ttl":1}`))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := Encode(m)
	if want := `{"v":1,"t":"present","id":"r","sum":"é/\"\u0007","opt":["allow","deny"],"ttl":1}` + "\n"; string(enc) != want {
		t.Errorf("canonical form\n got %s\nwant %s", enc, want)
	}
	big := Text{Channel: 0, Content: rep("é", 512)} // 1024 bytes, valid
	if _, err := Encode(big); err != nil {
		t.Errorf("1024-byte content: %v", err)
	}
}

// The encoder measures the escaped frame: text content of 1024 TABs is
// valid and, escaped as \t, fits 4096 bytes but not a 512-byte negotiation.
func TestEncodeTooLarge(t *testing.T) {
	m := Text{Content: rep("\t", 1024)}
	b, err := Encode(m)
	if err != nil || len(b) <= 2048 || len(b) > MaxFrameBytes {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	neg := mustNegotiate(t, 512, ProfileApproval, ProfileText)
	if _, err := neg.Encode(m); CodeOf(err) != CodeMessageTooLarge {
		t.Errorf("want message_too_large, got %v", err)
	}
}
