package protocol

import (
	"reflect"
	"strings"
	"testing"
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
