package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

func dsFrameError(t *testing.T, f ServerFrame, err error, reason FrameRejectReason, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted as %#v, want a %s refusal", f, reason)
	}
	if f != nil {
		t.Errorf("a refusal returned a frame too: %#v", f)
	}
	var fe *FrameError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T %v is not a *FrameError", err, err)
	}
	var ie *InstructionError
	if errors.As(err, &ie) {
		t.Errorf("error %v is also an InstructionError", err)
	}
	if fe.Reason != reason {
		t.Errorf("reason = %s (%v), want %s", fe.Reason, err, reason)
	}
	if field != "" && fe.Field != field {
		t.Errorf("field = %q (%v), want %q", fe.Field, err, field)
	}
}

func TestDecodeServerFrameRefusals(t *testing.T) {
	exactCap := func(extra int) string {
		head, tail := `{"t":"ping","pad":"`, `"}`
		return head + strings.Repeat("a", MaxFrameBytes+extra-len(head)-len(tail)) + tail
	}
	const ins = `"gen":"7","instructionId":"ins_1","rootSessionId":"s","issuedSeq":0,"timeoutMs":1`
	tests := []struct {
		name   string
		kind   MessageKind
		data   string
		reason FrameRejectReason
		field  string
	}{
		// frame_too_large
		{"one byte over MaxFrameBytes", TextMessage, exactCap(1), ReasonFrameTooLarge, ""},
		{"far over MaxFrameBytes and not JSON", TextMessage, strings.Repeat("x", 2*MaxFrameBytes), ReasonFrameTooLarge, ""},
		// not_json
		{"binary message", BinaryMessage, `{"t":"ping"}`, ReasonNotJSON, ""},
		{"empty", TextMessage, ``, ReasonNotJSON, ""},
		{"whitespace only", TextMessage, "  \n", ReasonNotJSON, ""},
		{"truncated", TextMessage, `{"t":"ping"`, ReasonNotJSON, ""},
		{"unquoted name", TextMessage, `{t:"ping"}`, ReasonNotJSON, ""},
		{"single quotes", TextMessage, `{"t":'ping'}`, ReasonNotJSON, ""},
		{"trailing comma", TextMessage, `{"t":"ping",}`, ReasonNotJSON, ""},
		{"two objects", TextMessage, `{"t":"ping"}{"t":"ping"}`, ReasonNotJSON, ""},
		{"trailing garbage", TextMessage, `{"t":"ping"} x`, ReasonNotJSON, ""},
		{"invalid UTF-8", TextMessage, "{\"t\":\"ping\",\"x\":\"\xff\"}", ReasonNotJSON, ""},
		{"leading zero number", TextMessage, `{"t":"ping","x":01}`, ReasonNotJSON, ""},
		// not_object
		{"array", TextMessage, `[{"t":"ping"}]`, ReasonNotObject, ""},
		{"empty array", TextMessage, `[]`, ReasonNotObject, ""},
		{"string", TextMessage, `"ping"`, ReasonNotObject, ""},
		{"number", TextMessage, `1`, ReasonNotObject, ""},
		{"null", TextMessage, `null`, ReasonNotObject, ""},
		{"boolean", TextMessage, `true`, ReasonNotObject, ""},
		// unknown_type
		{"no t", TextMessage, `{"gen":"7","instructionId":"ins_1"}`, ReasonUnknownType, ""},
		{"empty object", TextMessage, `{}`, ReasonUnknownType, ""},
		{"t is a number", TextMessage, `{"t":1}`, ReasonUnknownType, ""},
		{"t is null", TextMessage, `{"t":null}`, ReasonUnknownType, ""},
		{"t is an array", TextMessage, `{"t":["ping"]}`, ReasonUnknownType, ""},
		{"t is empty", TextMessage, `{"t":""}`, ReasonUnknownType, ""},
		{"t in the wrong case", TextMessage, `{"t":"Ping"}`, ReasonUnknownType, ""},
		{"t unknown", TextMessage, `{"t":"pong"}`, ReasonUnknownType, ""},
		// bad_shape: duplicates
		{"repeated t", TextMessage, `{"t":"ping","t":"ping"}`, ReasonBadShape, ""},
		{"repeated gen", TextMessage, `{"t":"cancel","gen":"7","gen":"8","instructionId":"ins_1"}`, ReasonBadShape, ""},
		{"repeated nested member", TextMessage, `{"t":"instruction",` + ins + `,"kind":"readTextFile","args":{"path":"/a","path":"/b"}}`, ReasonBadShape, ""},
		// bad_shape: challenge
		{"challenge protocolVersion float", TextMessage, `{"t":"challenge","nonce":"n","protocolVersion":1.0}`, ReasonBadShape, "protocolVersion"},
		{"challenge protocolVersion string", TextMessage, `{"t":"challenge","nonce":"n","protocolVersion":"1"}`, ReasonBadShape, "protocolVersion"},
		{"challenge nonce number", TextMessage, `{"t":"challenge","nonce":1,"protocolVersion":1}`, ReasonBadShape, "nonce"},
		// bad_shape: helloAck
		{"helloAck ok false", TextMessage, `{"t":"helloAck","ok":false,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":{}}`, ReasonBadShape, "ok"},
		{"helloAck ok string", TextMessage, `{"t":"helloAck","ok":"true","heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":{}}`, ReasonBadShape, "ok"},
		{"helloAck ok null", TextMessage, `{"t":"helloAck","ok":null,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":{}}`, ReasonBadShape, "ok"},
		{"helloAck heartbeatIntervalMs float", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":1.5e4,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":{}}`, ReasonBadShape, "heartbeatIntervalMs"},
		{"helloAck gen number", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":7,"pendingInstructions":[],"chunkWatermarks":{}}`, ReasonBadShape, "gen"},
		{"helloAck pendingInstructions not an array", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":"ins_1","chunkWatermarks":{}}`, ReasonBadShape, "pendingInstructions"},
		{"helloAck pendingInstructions null", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":null,"chunkWatermarks":{}}`, ReasonBadShape, "pendingInstructions"},
		{"helloAck pendingInstructions element not a string", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_1",2],"chunkWatermarks":{}}`, ReasonBadShape, "pendingInstructions[1]"},
		{"helloAck chunkWatermarks not an object", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":[]}`, ReasonBadShape, "chunkWatermarks"},
		{"helloAck chunkWatermarks null", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":null}`, ReasonBadShape, "chunkWatermarks"},
		{"helloAck chunkWatermarks value below -1", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_1"],"chunkWatermarks":{"ins_1":-2}}`, ReasonBadShape, "chunkWatermarks.ins_1"},
		{"helloAck chunkWatermarks value a string", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_1"],"chunkWatermarks":{"ins_1":"3"}}`, ReasonBadShape, "chunkWatermarks.ins_1"},
		{"helloAck chunkWatermarks value a float", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_1"],"chunkWatermarks":{"ins_1":3.5}}`, ReasonBadShape, "chunkWatermarks.ins_1"},
		{"helloAck chunkWatermarks value unsafe", TextMessage, `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_1"],"chunkWatermarks":{"ins_1":9007199254740992}}`, ReasonBadShape, "chunkWatermarks.ins_1"},
		// bad_shape: helloReject
		{"helloReject code outside the set", TextMessage, `{"t":"helloReject","code":"banned"}`, ReasonBadShape, "code"},
		{"helloReject code in the wrong case", TextMessage, `{"t":"helloReject","code":"AUTH_FAILED"}`, ReasonBadShape, "code"},
		{"helloReject code empty", TextMessage, `{"t":"helloReject","code":""}`, ReasonBadShape, "code"},
		{"helloReject code a bye reason", TextMessage, `{"t":"helloReject","code":"superseded"}`, ReasonBadShape, "code"},
		{"helloReject code number", TextMessage, `{"t":"helloReject","code":1}`, ReasonBadShape, "code"},
		{"helloReject minProtocolVersion negative", TextMessage, `{"t":"helloReject","code":"protocol_version_unsupported","minProtocolVersion":-1}`, ReasonBadShape, "minProtocolVersion"},
		{"helloReject minProtocolVersion string", TextMessage, `{"t":"helloReject","code":"protocol_version_unsupported","minProtocolVersion":"1"}`, ReasonBadShape, "minProtocolVersion"},
		// bad_shape: bye
		{"bye reason outside the set", TextMessage, `{"t":"bye","gen":"7","reason":"bored"}`, ReasonBadShape, "reason"},
		{"bye reason a goodbye reason", TextMessage, `{"t":"bye","gen":"7","reason":"shutdown"}`, ReasonBadShape, "reason"},
		{"bye reason in the wrong case", TextMessage, `{"t":"bye","gen":"7","reason":"Revoked"}`, ReasonBadShape, "reason"},
		{"bye reason null", TextMessage, `{"t":"bye","gen":"7","reason":null}`, ReasonBadShape, "reason"},
		// bad_shape: chunkAck
		{"chunkAck upToStreamSeq below -1", TextMessage, `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":-2}`, ReasonBadShape, "upToStreamSeq"},
		{"chunkAck upToStreamSeq float", TextMessage, `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":1.0}`, ReasonBadShape, "upToStreamSeq"},
		{"chunkAck upToStreamSeq exponent", TextMessage, `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":1e2}`, ReasonBadShape, "upToStreamSeq"},
		{"chunkAck upToStreamSeq string", TextMessage, `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":"3"}`, ReasonBadShape, "upToStreamSeq"},
		{"chunkAck upToStreamSeq unsafe", TextMessage, `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":9007199254740992}`, ReasonBadShape, "upToStreamSeq"},
		{"cancel instructionId number", TextMessage, `{"t":"cancel","gen":"7","instructionId":1}`, ReasonBadShape, "instructionId"},
		// bad_shape: payload
		{"payload part outside the set", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"middle","offset":0,"dataB64":""}`, ReasonBadShape, "part"},
		{"payload chunk with sha256", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":"YWJj","sha256":"` + dsSHA + `"}`, ReasonBadShape, "part"},
		{"payload chunk with totalLen", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":"YWJj","totalLen":3}`, ReasonBadShape, "part"},
		{"payload begin with dataB64", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"begin","totalLen":3,"sha256":"` + dsSHA + `","dataB64":"YWJj"}`, ReasonBadShape, "part"},
		{"payload begin with offset", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"begin","totalLen":3,"sha256":"` + dsSHA + `","offset":0}`, ReasonBadShape, "part"},
		{"payload commit with dataB64", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":"` + dsSHA + `","dataB64":""}`, ReasonBadShape, "part"},
		{"payload chunk offset negative", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":-1,"dataB64":"YWJj"}`, ReasonBadShape, "offset"},
		{"payload begin totalLen negative", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"begin","totalLen":-1,"sha256":"` + dsSHA + `"}`, ReasonBadShape, "totalLen"},
		{"payload sha256 63 characters", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"begin","totalLen":3,"sha256":"` + dsSHA[:63] + `"}`, ReasonBadShape, "sha256"},
		{"payload sha256 65 characters", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":"` + dsSHA + `0"}`, ReasonBadShape, "sha256"},
		{"payload sha256 not hex", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":"` + dsSHA[:62] + `zz"}`, ReasonBadShape, "sha256"},
		{"payload sha256 base64", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":"ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="}`, ReasonBadShape, "sha256"},
		{"payload sha256 number", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":1}`, ReasonBadShape, "sha256"},
		{"payload dataB64 number", TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":1}`, ReasonBadShape, "dataB64"},
	}
	// §4 Encoding: dataB64 must be canonical standard base64.
	for _, b := range []string{
		"YWJ", "YQ", "YQ=", "YQ===", "YR==", "YWI", "YWJjZA=", "YW Jj", `YW\nJj`, `YWJj\n`, `YW\r\nJj`,
		"-_8=", "_-8=", "YWJj=", "=YWJj", "YQ==YQ==", "YWJj*", "Y", "%%%%",
	} {
		tests = append(tests, struct {
			name   string
			kind   MessageKind
			data   string
			reason FrameRejectReason
			field  string
		}{"payload dataB64 " + b, TextMessage, `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":"` + b + `"}`, ReasonBadShape, "dataB64"})
	}
	for _, ft := range DeviceFrameTypes() {
		tests = append(tests, struct {
			name   string
			kind   MessageKind
			data   string
			reason FrameRejectReason
			field  string
		}{"device frame type " + string(ft), TextMessage, `{"t":"` + string(ft) + `","gen":"7"}`, ReasonUnknownType, ""})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := DecodeServerFrame(tt.kind, []byte(tt.data))
			dsFrameError(t, f, err, tt.reason, tt.field)
		})
	}
}

// A frame of exactly MaxFrameBytes is within the cap.
func TestDecodeServerFrameAcceptsExactlyMaxFrameBytes(t *testing.T) {
	head, tail := `{"t":"ping","pad":"`, `"}`
	data := head + strings.Repeat("a", MaxFrameBytes-len(head)-len(tail)) + tail
	if len(data) != MaxFrameBytes {
		t.Fatalf("test frame is %d bytes", len(data))
	}
	if f := dsDecode(t, data); !reflect.DeepEqual(f, &Ping{}) {
		t.Errorf("got %#v, want ping", f)
	}
	// A payload chunk near the cap keeps its bytes.
	raw := make([]byte, DefaultPayloadPartBytes)
	for i := range raw {
		raw[i] = byte(i)
	}
	enc, err := (&Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Data: raw}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	f := dsDecode(t, string(enc))
	if p, ok := f.(*Payload); !ok || string(p.Data) != string(raw) {
		t.Errorf("a %d-byte payload part did not survive decoding", len(raw))
	}
}

// Every required member of every frame: leaving it out is bad_shape naming
// it (for an instruction, an envelope fault: a *FrameError, never an
// InstructionError). Leaving out t is unknown_type. Every other member is
// optional.
func TestDecodeServerFrameRequiredMembers(t *testing.T) {
	for _, fr := range dsFrames() {
		for _, m := range fr.members {
			t.Run(fr.name+" without "+m.name, func(t *testing.T) {
				data := dsObject(dsWithout(fr.members, m.name)...)
				f, err := DecodeServerFrame(TextMessage, []byte(data))
				required := m.name == "t"
				for _, r := range fr.required {
					required = required || r == m.name
				}
				switch {
				case m.name == "t":
					dsFrameError(t, f, err, ReasonUnknownType, "")
				case required:
					dsFrameError(t, f, err, ReasonBadShape, m.name)
				case err != nil:
					t.Errorf("%s is optional, but leaving it out is refused: %v", m.name, err)
				}
			})
		}
	}
}

// §1.5, §2.2: gen is a canonical decimal string on every frame that carries
// it; anything else is bad_shape naming gen.
func TestDecodeServerFrameRefusesNonCanonicalGen(t *testing.T) {
	bad := []string{`7`, `7.0`, `"07"`, `"00"`, `"+7"`, `"-7"`, `" 7"`, `"7 "`, `"7.0"`, `""`, `"0x7"`, `"7e0"`,
		`"18446744073709551616"`, `null`, `true`, `["7"]`, `{"v":"7"}`}
	for _, fr := range dsFrames() {
		hasGen := false
		for _, m := range fr.members {
			hasGen = hasGen || m.name == "gen"
		}
		if !hasGen {
			continue
		}
		for _, g := range bad {
			t.Run(fr.name+" gen "+g, func(t *testing.T) {
				data := dsObject(dsWith(fr.members, "gen", g)...)
				f, err := DecodeServerFrame(TextMessage, []byte(data))
				dsFrameError(t, f, err, ReasonBadShape, "gen")
			})
		}
		t.Run(fr.name+" max gen", func(t *testing.T) {
			f := dsDecode(t, dsObject(dsWith(fr.members, "gen", `"18446744073709551615"`)...))
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"gen":"18446744073709551615"`) {
				t.Errorf("max gen did not survive: %s", b)
			}
		})
	}
}

// §3.1, §5.0: an instruction's envelope is held as a frame; a bad envelope
// is a *FrameError bad_shape, even when the args are bad too.
