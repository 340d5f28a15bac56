package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// DecodeServerFrame as the executor uses it (§2.3, §2.4, §3.1, §3.4, §3.5, §4).

// dsMember is one member of a frame under construction: its name and its raw
// JSON value.
type dsMember struct{ name, raw string }

// dsObject writes the members as a JSON object, in order.
func dsObject(ms ...dsMember) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + m.name + `":` + m.raw)
	}
	b.WriteByte('}')
	return b.String()
}

// dsWithout returns ms without the member called name.
func dsWithout(ms []dsMember, name string) []dsMember {
	var out []dsMember
	for _, m := range ms {
		if m.name != name {
			out = append(out, m)
		}
	}
	return out
}

// dsWith returns ms with the member called name replaced by raw, or
// appended when absent.
func dsWith(ms []dsMember, name, raw string) []dsMember {
	out := make([]dsMember, 0, len(ms)+1)
	found := false
	for _, m := range ms {
		if m.name == name {
			m.raw = raw
			found = true
		}
		out = append(out, m)
	}
	if !found {
		out = append(out, dsMember{name, raw})
	}
	return out
}

const (
	dsSHA = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" // sha256("abc")
	dsIns = "ins_01J8ZQ4T9X7M3K5N6P8R0S2V4W"
)

var dsDigest = func() Digest {
	d, err := ParseDigest(dsSHA)
	if err != nil {
		panic(err)
	}
	return d
}()

// dsFrame is a well-formed server frame, member by member, with what
// DecodeServerFrame must return for it and which members are required.
type dsFrame struct {
	name     string
	members  []dsMember
	want     ServerFrame
	required []string
}

func dsInstructionMembers(kind, args string) []dsMember {
	return []dsMember{
		{"t", `"instruction"`}, {"gen", `"7"`}, {"instructionId", `"` + dsIns + `"`},
		{"rootSessionId", `"ses_1"`}, {"issuedSeq", `3`}, {"kind", `"` + kind + `"`},
		{"args", args}, {"timeoutMs", `30000`},
	}
}

func dsInstruction(kind InstructionKind, args Args) *Instruction {
	return &Instruction{Gen: 7, InstructionID: dsIns, RootSessionID: "ses_1", IssuedSeq: 3, Kind: kind, Args: args, TimeoutMs: 30000}
}

func dsFrames() []dsFrame {
	full := dsInstruction(KindExecStream, CommandArgs{Command: "ls"})
	full.Cwd = "/w"
	full.ShellEnv = map[string]string{"A": "1", "B": ""}
	return []dsFrame{
		{"challenge",
			[]dsMember{{"t", `"challenge"`}, {"nonce", `"bm9uY2UtdGVzdC12ZWN0b3I="`}, {"protocolVersion", `1`}},
			&Challenge{Nonce: "bm9uY2UtdGVzdC12ZWN0b3I=", ProtocolVersion: 1},
			[]string{"nonce", "protocolVersion"}},
		{"helloAck",
			[]dsMember{{"t", `"helloAck"`}, {"ok", `true`}, {"heartbeatIntervalMs", `15000`}, {"maxInflight", `4`}, {"gen", `"7"`},
				{"pendingInstructions", `["ins_a","ins_b"]`}, {"chunkWatermarks", `{"ins_a":-1,"ins_b":12}`}},
			&HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 7, PendingInstructions: []string{"ins_a", "ins_b"},
				ChunkWatermarks: map[string]int64{"ins_a": -1, "ins_b": 12}},
			[]string{"ok", "heartbeatIntervalMs", "maxInflight", "gen", "pendingInstructions", "chunkWatermarks"}},
		{"helloAck empty",
			[]dsMember{{"t", `"helloAck"`}, {"ok", `true`}, {"heartbeatIntervalMs", `15000`}, {"maxInflight", `4`}, {"gen", `"0"`},
				{"pendingInstructions", `[]`}, {"chunkWatermarks", `{}`}},
			&HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 0, PendingInstructions: []string{}, ChunkWatermarks: map[string]int64{}},
			[]string{"ok", "heartbeatIntervalMs", "maxInflight", "gen", "pendingInstructions", "chunkWatermarks"}},
		{"helloReject",
			[]dsMember{{"t", `"helloReject"`}, {"code", `"auth_failed"`}},
			&HelloReject{Code: RejectAuthFailed},
			[]string{"code"}},
		{"helloReject minProtocolVersion",
			[]dsMember{{"t", `"helloReject"`}, {"code", `"protocol_version_unsupported"`}, {"minProtocolVersion", `1`}},
			&HelloReject{Code: RejectProtocolVersionUnsupported, MinProtocolVersion: ptr(1)},
			[]string{"code"}},
		{"instruction",
			dsInstructionMembers("exec", `{"command":"echo hi"}`),
			dsInstruction(KindExec, CommandArgs{Command: "echo hi"}),
			[]string{"gen", "instructionId", "rootSessionId", "issuedSeq", "kind", "args", "timeoutMs"}},
		{"instruction cwd and shellEnv",
			append(dsInstructionMembers("execStream", `{"command":"ls"}`), dsMember{"cwd", `"/w"`}, dsMember{"shellEnv", `{"A":"1","B":""}`}),
			full,
			[]string{"gen", "instructionId", "rootSessionId", "issuedSeq", "kind", "args", "timeoutMs"}},
		{"payload begin",
			[]dsMember{{"t", `"payload"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}, {"part", `"begin"`}, {"totalLen", `3`}, {"sha256", `"` + dsSHA + `"`}},
			&Payload{Gen: 7, InstructionID: "ins_1", Part: PartBegin, TotalLen: 3, SHA256: dsDigest},
			[]string{"gen", "instructionId", "part", "totalLen", "sha256"}},
		{"payload chunk",
			[]dsMember{{"t", `"payload"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}, {"part", `"chunk"`}, {"offset", `0`}, {"dataB64", `"YWJj"`}},
			&Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Offset: 0, Data: []byte("abc")},
			[]string{"gen", "instructionId", "part", "offset", "dataB64"}},
		{"payload chunk empty data",
			[]dsMember{{"t", `"payload"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}, {"part", `"chunk"`}, {"offset", `3`}, {"dataB64", `""`}},
			&Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Offset: 3, Data: []byte{}},
			[]string{"gen", "instructionId", "part", "offset", "dataB64"}},
		{"payload commit",
			[]dsMember{{"t", `"payload"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}, {"part", `"commit"`}, {"totalLen", `3`}, {"sha256", `"` + dsSHA + `"`}},
			&Payload{Gen: 7, InstructionID: "ins_1", Part: PartCommit, TotalLen: 3, SHA256: dsDigest},
			[]string{"gen", "instructionId", "part", "totalLen", "sha256"}},
		{"cancel",
			[]dsMember{{"t", `"cancel"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}},
			&Cancel{Gen: 7, InstructionID: "ins_1"},
			[]string{"gen", "instructionId"}},
		{"resultAck",
			[]dsMember{{"t", `"resultAck"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}},
			&ResultAck{Gen: 7, InstructionID: "ins_1"},
			[]string{"gen", "instructionId"}},
		{"chunkAck",
			[]dsMember{{"t", `"chunkAck"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}, {"upToStreamSeq", `12`}},
			&ChunkAck{Gen: 7, InstructionID: "ins_1", UpToStreamSeq: 12},
			[]string{"gen", "instructionId", "upToStreamSeq"}},
		{"chunkAck nothing accepted yet",
			[]dsMember{{"t", `"chunkAck"`}, {"gen", `"7"`}, {"instructionId", `"ins_1"`}, {"upToStreamSeq", `-1`}},
			&ChunkAck{Gen: 7, InstructionID: "ins_1", UpToStreamSeq: -1},
			[]string{"gen", "instructionId", "upToStreamSeq"}},
		{"bye",
			[]dsMember{{"t", `"bye"`}, {"gen", `"7"`}, {"reason", `"superseded"`}},
			&Bye{Gen: 7, Reason: ByeSuperseded},
			[]string{"gen", "reason"}},
		{"ping",
			[]dsMember{{"t", `"ping"`}},
			&Ping{},
			nil},
	}
}

func dsDecode(t *testing.T, data string) ServerFrame {
	t.Helper()
	f, err := DecodeServerFrame(TextMessage, []byte(data))
	if err != nil {
		t.Fatalf("DecodeServerFrame(%s): %v", data, err)
	}
	return f
}

func TestDecodeServerFrameAcceptsEveryType(t *testing.T) {
	seen := map[ServerFrameType]bool{}
	for _, tt := range dsFrames() {
		t.Run(tt.name, func(t *testing.T) {
			got := dsDecode(t, dsObject(tt.members...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
			seen[got.Type()] = true
		})
	}
	for _, ft := range ServerFrameTypes() {
		if !seen[ft] {
			t.Errorf("no accepted case for server frame type %s", ft)
		}
	}
}

// Every helloReject code, bye reason and payload part of the closed sets is
// accepted as itself.
func TestDecodeServerFrameAcceptsEveryClosedSetMember(t *testing.T) {
	for _, c := range HelloRejectCodes() {
		got := dsDecode(t, `{"t":"helloReject","code":"`+string(c)+`"}`)
		if want := (&HelloReject{Code: c}); !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v, want %#v", got, want)
		}
	}
	for _, r := range ByeReasons() {
		got := dsDecode(t, `{"t":"bye","gen":"1","reason":"`+string(r)+`"}`)
		if want := (&Bye{Gen: 1, Reason: r}); !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v, want %#v", got, want)
		}
	}
}

// §2.3/§8: ping is declared but never sent; an executor accepts it. Unknown
// members are ignored at every level, and JSON whitespace is JSON.
func TestDecodeServerFrameIgnoresUnknownMembers(t *testing.T) {
	extra := `{"nested":[1,2.5,{"deep":null}],"s":"x"}`
	tests := []struct {
		name string
		data string
		want ServerFrame
	}{
		{"ping with members", `{"t":"ping","gen":"7","x":` + extra + `}`, &Ping{}},
		{"ping with whitespace", " \n\t{ \"t\" : \"ping\" } \r\n", &Ping{}},
		{"ping with t escaped", `{"t":"p\u0069ng"}`, &Ping{}},
		{"challenge", `{"x":1,"t":"challenge","nonce":"n","y":` + extra + `,"protocolVersion":2,"z":false}`,
			&Challenge{Nonce: "n", ProtocolVersion: 2}},
		{"helloAck", `{"t":"helloAck","ok":true,"future":` + extra + `,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":[],"chunkWatermarks":{}}`,
			&HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 7, PendingInstructions: []string{}, ChunkWatermarks: map[string]int64{}}},
		{"helloReject", `{"t":"helloReject","code":"draining","retryAfterMs":5,"why":` + extra + `}`,
			&HelloReject{Code: RejectDraining}},
		{"instruction top level and args", `{"t":"instruction","gen":"7","instructionId":"ins_1","rootSessionId":"s","issuedSeq":0,"kind":"readTextLines","args":{"path":"/w/a","limit":10,"encoding":"utf8","x":` + extra + `},"timeoutMs":1000,"priority":` + extra + `}`,
			&Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "s", Kind: KindReadTextLines, Args: ReadLinesArgs{Path: "/w/a", Limit: ptr(int64(10))}, TimeoutMs: 1000}},
		{"instruction expect", `{"t":"instruction","gen":"7","instructionId":"ins_1","rootSessionId":"s","issuedSeq":0,"kind":"writeFileGuarded","args":{"path":"/w/a","contentLen":3,"sha256":"` + dsSHA + `","expect":{"canonicalPath":"/w/a","mtimeMs":5,"x":` + extra + `}},"timeoutMs":1000}`,
			&Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "s", Kind: KindWriteFileGuarded, Args: WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: dsDigest, Expect: &Expect{CanonicalPath: "/w/a"}}, TimeoutMs: 1000}},
		{"instruction expect on a kind that has none is ignored", `{"t":"instruction","gen":"7","instructionId":"ins_1","rootSessionId":"s","issuedSeq":0,"kind":"writeFile","args":{"path":"/w/a","contentLen":3,"sha256":"` + dsSHA + `","expect":{"canonicalPath":"/w/a"}},"timeoutMs":1000}`,
			&Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "s", Kind: KindWriteFile, Args: WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: dsDigest}, TimeoutMs: 1000}},
		{"payload", `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":"YQ==","x":` + extra + `}`,
			&Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Data: []byte("a")}},
		{"cancel", `{"t":"cancel","gen":"7","instructionId":"ins_1","reason":"user"}`, &Cancel{Gen: 7, InstructionID: "ins_1"}},
		{"resultAck", `{"t":"resultAck","gen":"7","instructionId":"ins_1","accepted":true}`, &ResultAck{Gen: 7, InstructionID: "ins_1"}},
		{"chunkAck", `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":0,"window":` + extra + `}`, &ChunkAck{Gen: 7, InstructionID: "ins_1"}},
		{"bye", `{"t":"bye","gen":"7","reason":"draining","detail":"x"}`, &Bye{Gen: 7, Reason: ByeDraining}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dsDecode(t, tt.data)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// dsFrameError asserts err is a *FrameError (and not an InstructionError)
// with the reason, and with the field when field is not "".
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
func TestDecodeServerFrameInstructionEnvelopeFaults(t *testing.T) {
	base := dsInstructionMembers("readTextFile", `{"path":"/w/a"}`)
	tests := []struct {
		name    string
		members []dsMember
		field   string
	}{
		{"gen number", dsWith(base, "gen", `7`), "gen"},
		{"gen leading zero", dsWith(base, "gen", `"07"`), "gen"},
		{"instructionId empty", dsWith(base, "instructionId", `""`), "instructionId"},
		{"instructionId number", dsWith(base, "instructionId", `1`), "instructionId"},
		{"rootSessionId number", dsWith(base, "rootSessionId", `1`), "rootSessionId"},
		{"issuedSeq negative", dsWith(base, "issuedSeq", `-1`), "issuedSeq"},
		{"issuedSeq string", dsWith(base, "issuedSeq", `"3"`), "issuedSeq"},
		{"issuedSeq unsafe", dsWith(base, "issuedSeq", `9007199254740992`), "issuedSeq"},
		{"kind number", dsWith(base, "kind", `5`), "kind"},
		{"kind null", dsWith(base, "kind", `null`), "kind"},
		{"timeoutMs float", dsWith(base, "timeoutMs", `1.5`), "timeoutMs"},
		{"timeoutMs negative", dsWith(base, "timeoutMs", `-1`), "timeoutMs"},
		{"timeoutMs string", dsWith(base, "timeoutMs", `"1000"`), "timeoutMs"},
		{"args array", dsWith(base, "args", `["/w/a"]`), "args"},
		{"args string", dsWith(base, "args", `"/w/a"`), "args"},
		{"args null", dsWith(base, "args", `null`), "args"},
		{"args array with an unknown kind", dsWith(dsWith(base, "kind", `"teleport"`), "args", `[]`), "args"},
		{"shellEnv array", dsWith(base, "shellEnv", `["A=1"]`), "shellEnv"},
		{"shellEnv value number", dsWith(base, "shellEnv", `{"A":1}`), "shellEnv.A"},
		{"missing timeoutMs with bad args", dsWithout(dsWith(base, "args", `{"path":"a/b"}`), "timeoutMs"), "timeoutMs"},
		{"missing gen with an unknown kind", dsWithout(dsWith(base, "kind", `"teleport"`), "gen"), "gen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := DecodeServerFrame(TextMessage, []byte(dsObject(tt.members...)))
			dsFrameError(t, f, err, ReasonBadShape, tt.field)
		})
	}
}

// dsInstructionError asserts err is an *InstructionError for the instruction
// dsIns with the code and a Detail naming field, and that it answers with
// the ok:false outcome carrying that code.
func dsInstructionError(t *testing.T, f ServerFrame, err error, kind InstructionKind, code ErrorCode, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted as %#v, want an InstructionError %s", f, code)
	}
	if f != nil {
		t.Errorf("an InstructionError returned a frame too: %#v", f)
	}
	var ie *InstructionError
	if !errors.As(err, &ie) {
		t.Fatalf("error %T %v is not an *InstructionError", err, err)
	}
	var fe *FrameError
	if errors.As(err, &fe) {
		t.Errorf("error %v is also a FrameError", err)
	}
	if ie.InstructionID != dsIns {
		t.Errorf("InstructionID = %q, want %q", ie.InstructionID, dsIns)
	}
	if ie.Kind != kind {
		t.Errorf("Kind = %q, want %q", ie.Kind, kind)
	}
	if ie.Code != code {
		t.Errorf("Code = %q, want %q (%v)", ie.Code, code, err)
	}
	if field != "" && !strings.Contains(ie.Detail, field) {
		t.Errorf("Detail %q does not name %q", ie.Detail, field)
	}
	fail := ie.Failure()
	if want := (Failure{ErrorCode: code, Message: ie.Detail}); fail != want {
		t.Errorf("Failure() = %#v, want %#v", fail, want)
	}
	if fail.OK() || fail.Kind() != "" {
		t.Errorf("Failure() is not the ok:false arm")
	}
	b, err := json.Marshal(fail)
	if err != nil {
		t.Fatalf("the answer does not encode: %v", err)
	}
	if prefix := `{"ok":false,"errorCode":"` + string(code) + `","message":`; !strings.HasPrefix(string(b), prefix) {
		t.Errorf("answer %s does not begin %s", b, prefix)
	}
	res, err := json.Marshal(&Result{Gen: 7, InstructionID: ie.InstructionID, Outcome: fail})
	if err != nil {
		t.Fatalf("the answering result does not encode: %v", err)
	}
	if _, err := DecodeDeviceFrame(TextMessage, res, MaxFrameBytes); err != nil {
		t.Errorf("the answering result %s is refused: %v", res, err)
	}
}

// §7: a kind the executor does not know is answered not_supported.
func TestDecodeServerFrameUnknownKindIsNotSupported(t *testing.T) {
	for _, kind := range []string{"teleport", "Exec", "EXEC", "exec ", "statbatch", "readFile", ""} {
		t.Run(kind, func(t *testing.T) {
			for _, args := range []string{`{}`, `{"path":"/w/a"}`, `{"path":"a/b","command":5}`} {
				data := dsObject(dsInstructionMembers(kind, args)...)
				f, err := DecodeServerFrame(TextMessage, []byte(data))
				dsInstructionError(t, f, err, InstructionKind(kind), ErrNotSupported, "")
			}
		})
	}
}

// §3.1: args and cwd that do not fit the kind are answered invalid, with a
// Detail naming the field.
func TestDecodeServerFrameBadArgsAreInvalid(t *testing.T) {
	tests := []struct {
		name  string
		kind  InstructionKind
		args  string
		extra []dsMember
		field string
	}{
		{"missing path", KindReadTextFile, `{}`, nil, "args.path"},
		{"path null", KindFileInfo, `{"path":null}`, nil, "args.path"},
		{"path number", KindExists, `{"path":1}`, nil, "args.path"},
		{"path empty", KindListDir, `{"path":""}`, nil, "args.path"},
		{"relative path", KindReadTextFile, `{"path":"a/b"}`, nil, "args.path"},
		{"dot-relative path", KindCanonicalPath, `{"path":"./a"}`, nil, "args.path"},
		{"home-relative path", KindReadLink, `{"path":"~/a"}`, nil, "args.path"},
		{"non-normalized dot-dot", KindReadBinaryFile, `{"path":"/a/../b"}`, nil, "args.path"},
		{"non-normalized dot", KindReadTextFile, `{"path":"/a/./b"}`, nil, "args.path"},
		{"trailing slash", KindListDir, `{"path":"/a/"}`, nil, "args.path"},
		{"leading double slash", KindReadTextFile, `{"path":"//a"}`, nil, "args.path"},
		{"inner double slash", KindReadTextFile, `{"path":"/a//b"}`, nil, "args.path"},
		{"path with a NUL", KindReadTextFile, `{"path":"/a\u0000b"}`, nil, "args.path"},
		{"readTextLines relative path", KindReadTextLines, `{"path":"a","limit":1}`, nil, "args.path"},
		{"readTextLines negative limit", KindReadTextLines, `{"path":"/a","limit":-1}`, nil, "args.limit"},
		{"readTextLines float limit", KindReadTextLines, `{"path":"/a","limit":1.5}`, nil, "args.limit"},
		{"readTextLines string limit", KindReadTextLines, `{"path":"/a","limit":"10"}`, nil, "args.limit"},
		{"readTextLines negative offset", KindReadTextLines, `{"path":"/a","offset":-1}`, nil, "args.offset"},
		{"missing command", KindExec, `{}`, nil, "args.command"},
		{"command number", KindExecStream, `{"command":1}`, nil, "args.command"},
		{"command array", KindExec, `{"command":["ls","-la"]}`, nil, "args.command"},
		{"writeFile without sha256", KindWriteFile, `{"path":"/a","contentLen":3}`, nil, "args.sha256"},
		{"writeFile 63-char sha256", KindWriteFile, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA[:63] + `"}`, nil, "args.sha256"},
		{"writeFile non-hex sha256", KindWriteFile, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA[:63] + `g"}`, nil, "args.sha256"},
		{"writeFile without contentLen", KindWriteFile, `{"path":"/a","sha256":"` + dsSHA + `"}`, nil, "args.contentLen"},
		{"writeFile negative contentLen", KindWriteFile, `{"path":"/a","contentLen":-1,"sha256":"` + dsSHA + `"}`, nil, "args.contentLen"},
		{"writeFile relative path", KindWriteFile, `{"path":"a","contentLen":3,"sha256":"` + dsSHA + `"}`, nil, "args.path"},
		{"writeFileExclusive without path", KindWriteFileExclusive, `{"contentLen":3,"sha256":"` + dsSHA + `"}`, nil, "args.path"},
		{"appendFile without sha256", KindAppendFile, `{"path":"/a","contentLen":3}`, nil, "args.sha256"},
		{"writeFileGuarded without expect", KindWriteFileGuarded, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA + `"}`, nil, "args.expect"},
		{"writeFileGuarded expect null", KindWriteFileGuarded, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA + `","expect":null}`, nil, "args.expect"},
		{"writeFileGuarded expect without canonicalPath", KindWriteFileGuarded, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA + `","expect":{"fileId":"1"}}`, nil, "args.expect.canonicalPath"},
		{"writeFileGuarded expect exclusive string", KindWriteFileGuarded, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA + `","expect":{"canonicalPath":"/a","exclusive":"yes"}}`, nil, "args.expect.exclusive"},
		{"writeFileGuarded expect fileId number", KindWriteFileGuarded, `{"path":"/a","contentLen":3,"sha256":"` + dsSHA + `","expect":{"canonicalPath":"/a","fileId":42}}`, nil, "args.expect.fileId"},
		{"createDir recursive string", KindCreateDir, `{"path":"/a","recursive":"true"}`, nil, "args.recursive"},
		{"remove trailing slash", KindRemove, `{"path":"/a/"}`, nil, "args.path"},
		{"createTempDir prefix number", KindCreateTempDir, `{"prefix":1}`, nil, "args.prefix"},
		{"createTempFile suffix number", KindCreateTempFile, `{"suffix":1}`, nil, "args.suffix"},
		{"statBatch without paths", KindStatBatch, `{}`, nil, "args.paths"},
		{"statBatch relative path", KindStatBatch, `{"paths":["/a","b"]}`, nil, "args.paths[1]"},
		{"statBatch path not a string", KindStatBatch, `{"paths":[1]}`, nil, "args.paths[0]"},
		{"non-absolute cwd", KindExec, `{"command":"ls"}`, []dsMember{{"cwd", `"w"`}}, "cwd"},
		{"empty cwd", KindExec, `{"command":"ls"}`, []dsMember{{"cwd", `""`}}, "cwd"},
		{"non-normalized cwd", KindExec, `{"command":"ls"}`, []dsMember{{"cwd", `"/w/../x"`}}, "cwd"},
		{"cwd with a trailing slash", KindReadTextFile, `{"path":"/w/a"}`, []dsMember{{"cwd", `"/w/"`}}, "cwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := dsObject(append(dsInstructionMembers(string(tt.kind), tt.args), tt.extra...)...)
			f, err := DecodeServerFrame(TextMessage, []byte(data))
			dsInstructionError(t, f, err, tt.kind, ErrInvalid, tt.field)
		})
	}
}

// Every one of the 19 kinds decodes to its own Args type (§3.1).
func TestDecodeServerFrameEveryKindDecodesToItsArgs(t *testing.T) {
	table := map[InstructionKind]struct {
		args string
		want Args
	}{
		KindExec:               {`{"command":"echo hi"}`, CommandArgs{Command: "echo hi"}},
		KindExecStream:         {`{"command":"tail -n 5 /a"}`, CommandArgs{Command: "tail -n 5 /a"}},
		KindReadTextFile:       {`{"path":"/w/a.txt"}`, PathArgs{Path: "/w/a.txt"}},
		KindReadTextLines:      {`{"path":"/w/a.txt","offset":2,"limit":10}`, ReadLinesArgs{Path: "/w/a.txt", Offset: ptr(int64(2)), Limit: ptr(int64(10))}},
		KindReadBinaryFile:     {`{"path":"/w/a.bin"}`, PathArgs{Path: "/w/a.bin"}},
		KindWriteFile:          {`{"path":"/w/a","contentLen":3,"sha256":"` + dsSHA + `"}`, WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: dsDigest}},
		KindWriteFileExclusive: {`{"path":"/w/a","contentLen":3,"sha256":"` + dsSHA + `"}`, WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: dsDigest}},
		KindWriteFileGuarded: {`{"path":"/w/a","contentLen":3,"sha256":"` + dsSHA + `","expect":{"canonicalPath":"/w/a","fileId":"42","exclusive":false,"noFollow":true}}`,
			WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: dsDigest, Expect: &Expect{CanonicalPath: "/w/a", FileID: "42", NoFollow: true}}},
		KindAppendFile:     {`{"path":"/w/log","contentLen":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`, WriteArgs{Path: "/w/log", SHA256: Digest{0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55}}},
		KindFileInfo:       {`{"path":"/w"}`, PathArgs{Path: "/w"}},
		KindListDir:        {`{"path":"/"}`, PathArgs{Path: "/"}},
		KindCanonicalPath:  {`{"path":"/w/link"}`, PathArgs{Path: "/w/link"}},
		KindExists:         {`{"path":"/w/maybe"}`, PathArgs{Path: "/w/maybe"}},
		KindReadLink:       {`{"path":"/w/link"}`, PathArgs{Path: "/w/link"}},
		KindCreateDir:      {`{"path":"/w/d","recursive":true}`, DirArgs{Path: "/w/d", Recursive: ptr(true)}},
		KindRemove:         {`{"path":"/w/d","recursive":false}`, DirArgs{Path: "/w/d", Recursive: ptr(false)}},
		KindCreateTempDir:  {`{"prefix":"tmp-"}`, TempDirArgs{Prefix: "tmp-"}},
		KindCreateTempFile: {`{"prefix":"p","suffix":".txt"}`, TempFileArgs{Prefix: "p", Suffix: ".txt"}},
		KindStatBatch:      {`{"paths":["/a","/w/b"]}`, StatBatchArgs{Paths: []string{"/a", "/w/b"}}},
	}
	kinds := InstructionKinds()
	if len(kinds) != 19 {
		t.Errorf("InstructionKinds() has %d kinds, §3.1 has 19", len(kinds))
	}
	if len(table) != len(kinds) {
		t.Errorf("the table has %d kinds, InstructionKinds() %d", len(table), len(kinds))
	}
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			tt, ok := table[k]
			if !ok {
				t.Fatalf("no case for kind %s", k)
			}
			f := dsDecode(t, dsObject(dsInstructionMembers(string(k), tt.args)...))
			in, ok := f.(*Instruction)
			if !ok {
				t.Fatalf("decoded %T, want *Instruction", f)
			}
			if reflect.TypeOf(in.Args) != reflect.TypeOf(tt.want) {
				t.Errorf("args are %T, want %T", in.Args, tt.want)
			}
			if want := dsInstruction(k, tt.want); !reflect.DeepEqual(in, want) {
				t.Errorf("got %#v\nwant %#v", in, want)
			}
			if !ArgsFits(k, in.Args) {
				t.Errorf("decoded args %T do not fit %s", in.Args, k)
			}
		})
	}
}

// Optional args left out stay absent (nil), and are not invented.
func TestDecodeServerFrameOptionalArgsStayAbsent(t *testing.T) {
	tests := []struct {
		kind InstructionKind
		args string
		want Args
	}{
		{KindReadTextLines, `{"path":"/a"}`, ReadLinesArgs{Path: "/a"}},
		{KindCreateDir, `{"path":"/a"}`, DirArgs{Path: "/a"}},
		{KindRemove, `{"path":"/a"}`, DirArgs{Path: "/a"}},
		{KindCreateTempDir, `{}`, TempDirArgs{}},
		{KindCreateTempFile, `{}`, TempFileArgs{}},
		{KindWriteFileGuarded, `{"path":"/a","contentLen":1,"sha256":"` + dsSHA + `","expect":{"canonicalPath":"/a"}}`,
			WriteArgs{Path: "/a", ContentLen: 1, SHA256: dsDigest, Expect: &Expect{CanonicalPath: "/a"}}},
		{KindStatBatch, `{"paths":[]}`, StatBatchArgs{Paths: []string{}}},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			f := dsDecode(t, dsObject(dsInstructionMembers(string(tt.kind), tt.args)...))
			if want := dsInstruction(tt.kind, tt.want); !reflect.DeepEqual(f, want) {
				t.Errorf("got %#v\nwant %#v", f, want)
			}
		})
	}
}

// The returned frame does not alias the input.
func TestDecodeServerFrameDoesNotAliasInput(t *testing.T) {
	data := []byte(`{"t":"instruction","gen":"7","instructionId":"ins_1","rootSessionId":"s","issuedSeq":0,"kind":"execStream","args":{"command":"ls"},"cwd":"/w","shellEnv":{"AA":"bb"},"timeoutMs":1}`)
	f := dsDecode(t, string(data))
	for i := range data {
		data[i] = 'x'
	}
	in := f.(*Instruction)
	if in.InstructionID != "ins_1" || in.Cwd != "/w" || in.ShellEnv["AA"] != "bb" || in.Args != (CommandArgs{Command: "ls"}) {
		t.Errorf("the frame changed with its input: %#v", in)
	}
	data = []byte(`{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":"YWJj"}`)
	f, err := DecodeServerFrame(TextMessage, data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'x'
	}
	if p := f.(*Payload); string(p.Data) != "abc" || p.InstructionID != "ins_1" {
		t.Errorf("the payload changed with its input: %#v", p)
	}
}

func TestValidAbsPath(t *testing.T) {
	tests := []struct {
		p  string
		ok bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b", true},
		{"/w/a.txt", true},
		{"/a b/c", true},
		{"/.a", true},
		{"/a.", true},
		{"/a..", true},
		{"/...", true},
		{"/a\\b", true},
		{"/é/ü", true},
		{"", false},
		{"a", false},
		{"a/b", false},
		{"./a", false},
		{"../a", false},
		{"~/a", false},
		{" /a", false},
		{"//", false},
		{"//a", false},
		{"/a//b", false},
		{"/a/", false},
		{"/a/b/", false},
		{"/.", false},
		{"/..", false},
		{"/./a", false},
		{"/a/.", false},
		{"/a/./b", false},
		{"/a/..", false},
		{"/a/../b", false},
		{"/../a", false},
		{"/a\x00b", false},
		{"/\x00", false},
		{"\x00/a", false},
	}
	for _, tt := range tests {
		if got := ValidAbsPath(tt.p); got != tt.ok {
			t.Errorf("ValidAbsPath(%q) = %v, want %v", tt.p, got, tt.ok)
		}
	}
}

func TestParseGen(t *testing.T) {
	tests := []struct {
		s    string
		want Gen
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"7", 7, true},
		{"10", 10, true},
		{"1000000", 1000000, true},
		{"9007199254740993", 9007199254740993, true},
		{"18446744073709551615", 18446744073709551615, true},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"00", 0, false},
		{"07", 0, false},
		{"007", 0, false},
		{"+7", 0, false},
		{"-7", 0, false},
		{"-0", 0, false},
		{" 7", 0, false},
		{"7 ", 0, false},
		{"7\n", 0, false},
		{"7.0", 0, false},
		{"7.", 0, false},
		{"7e0", 0, false},
		{"0x7", 0, false},
		{"1_000", 0, false},
		{`"7"`, 0, false},
		{"٧", 0, false},
		{"７", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseGen(tt.s)
		if (err == nil) != tt.ok {
			t.Errorf("ParseGen(%q) err = %v, want ok=%v", tt.s, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if got != tt.want {
			t.Errorf("ParseGen(%q) = %d, want %d", tt.s, got, tt.want)
		}
		// Canonical spellings only: formatting gives back the string.
		if got.String() != tt.s {
			t.Errorf("ParseGen(%q).String() = %q", tt.s, got.String())
		}
		var g Gen
		if err := g.UnmarshalText([]byte(tt.s)); err != nil || g != tt.want {
			t.Errorf("UnmarshalText(%q) = %d, %v", tt.s, g, err)
		}
	}
}
