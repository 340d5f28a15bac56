package protocol

import (
	"crypto/sha256"
	"math"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

type serverWireCase struct {
	name    string
	frame   ServerFrame
	wire    string
	decoded ServerFrame
}

func serverWireCases() []serverWireCase {
	in := func(kind InstructionKind, args Args) *Instruction {
		return &Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "ses_1", IssuedSeq: 4, Kind: kind, Args: args, TimeoutMs: 30000}
	}
	withEnv := in(KindExecStream, CommandArgs{Command: "ls -la"})
	withEnv.Cwd = "/w"
	withEnv.ShellEnv = map[string]string{"ZED": "1", "A": "2", "M": "3", "a": "4", "B_2": "5"}
	withCwd := in(KindExec, CommandArgs{Command: ""})
	withCwd.Cwd = "/"
	withEmptyEnv := in(KindExec, CommandArgs{Command: "true"})
	withEmptyEnv.ShellEnv = map[string]string{}
	const head = `{"t":"instruction","gen":"7","instructionId":"ins_1","rootSessionId":"ses_1","issuedSeq":4,`
	return []serverWireCase{
		{name: "challenge", frame: &Challenge{Nonce: "bm9uY2UtdGVzdC12ZWN0b3I=", ProtocolVersion: 1},
			wire: `{"t":"challenge","nonce":"bm9uY2UtdGVzdC12ZWN0b3I=","protocolVersion":1}`},
		{name: "helloAck", frame: &HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 7,
			PendingInstructions: []string{"ins_b", "ins_a"},
			ChunkWatermarks:     map[string]int64{"ins_z": 3, "ins_a": -1, "ins_m": 12}},
			wire: `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_b","ins_a"],"chunkWatermarks":{"ins_a":-1,"ins_m":12,"ins_z":3}}`},
		{name: "helloAck empty", frame: &HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 0},
			wire:    `{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"0","pendingInstructions":[],"chunkWatermarks":{}}`,
			decoded: &HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 0, PendingInstructions: []string{}, ChunkWatermarks: map[string]int64{}}},
		{name: "helloAck empty non-nil", frame: &HelloAck{HeartbeatIntervalMs: 1, MaxInflight: 1, Gen: math.MaxUint64, PendingInstructions: []string{}, ChunkWatermarks: map[string]int64{}},
			wire: `{"t":"helloAck","ok":true,"heartbeatIntervalMs":1,"maxInflight":1,"gen":"18446744073709551615","pendingInstructions":[],"chunkWatermarks":{}}`},
		{name: "helloReject", frame: &HelloReject{Code: RejectAuthFailed},
			wire: `{"t":"helloReject","code":"auth_failed"}`},
		{name: "helloReject revoked", frame: &HelloReject{Code: RejectRevoked},
			wire: `{"t":"helloReject","code":"revoked"}`},
		{name: "helloReject draining", frame: &HelloReject{Code: RejectDraining},
			wire: `{"t":"helloReject","code":"draining"}`},
		{name: "helloReject already_connected", frame: &HelloReject{Code: RejectAlreadyConnected},
			wire: `{"t":"helloReject","code":"already_connected"}`},
		{name: "helloReject minProtocolVersion", frame: &HelloReject{Code: RejectProtocolVersionUnsupported, MinProtocolVersion: ptr(1)},
			wire: `{"t":"helloReject","code":"protocol_version_unsupported","minProtocolVersion":1}`},
		{name: "instruction exec CommandArgs", frame: in(KindExec, CommandArgs{Command: "echo hi"}),
			wire: head + `"kind":"exec","args":{"command":"echo hi"},"timeoutMs":30000}`},
		{name: "instruction execStream cwd and sorted shellEnv", frame: withEnv,
			wire: head + `"kind":"execStream","args":{"command":"ls -la"},"cwd":"/w","shellEnv":{"A":"2","B_2":"5","M":"3","ZED":"1","a":"4"},"timeoutMs":30000}`},
		{name: "instruction cwd root, empty command", frame: withCwd,
			wire: head + `"kind":"exec","args":{"command":""},"cwd":"/","timeoutMs":30000}`},
		{name: "instruction empty non-nil shellEnv", frame: withEmptyEnv,
			wire: head + `"kind":"exec","args":{"command":"true"},"shellEnv":{},"timeoutMs":30000}`},
		{name: "instruction readTextFile PathArgs", frame: in(KindReadTextFile, PathArgs{Path: "/w/a"}),
			wire: head + `"kind":"readTextFile","args":{"path":"/w/a"},"timeoutMs":30000}`},
		{name: "instruction readLink PathArgs", frame: in(KindReadLink, PathArgs{Path: "/"}),
			wire: head + `"kind":"readLink","args":{"path":"/"},"timeoutMs":30000}`},
		{name: "instruction readTextLines ReadLinesArgs bare", frame: in(KindReadTextLines, ReadLinesArgs{Path: "/w/a"}),
			wire: head + `"kind":"readTextLines","args":{"path":"/w/a"},"timeoutMs":30000}`},
		{name: "instruction readTextLines ReadLinesArgs limit", frame: in(KindReadTextLines, ReadLinesArgs{Path: "/w/a", Limit: ptr(int64(10))}),
			wire: head + `"kind":"readTextLines","args":{"path":"/w/a","limit":10},"timeoutMs":30000}`},
		{name: "instruction readTextLines ReadLinesArgs offset and limit zero", frame: in(KindReadTextLines, ReadLinesArgs{Path: "/w/a", Offset: ptr(int64(0)), Limit: ptr(int64(0))}),
			wire: head + `"kind":"readTextLines","args":{"path":"/w/a","offset":0,"limit":0},"timeoutMs":30000}`},
		{name: "instruction writeFile WriteArgs", frame: in(KindWriteFile, WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: wireSHA}),
			wire: head + `"kind":"writeFile","args":{"path":"/w/a","contentLen":3,"sha256":"` + wireSHAHex + `"},"timeoutMs":30000}`},
		{name: "instruction writeFileExclusive WriteArgs", frame: in(KindWriteFileExclusive, WriteArgs{Path: "/w/a", ContentLen: 0, SHA256: wireSHA}),
			wire: head + `"kind":"writeFileExclusive","args":{"path":"/w/a","contentLen":0,"sha256":"` + wireSHAHex + `"},"timeoutMs":30000}`},
		{name: "instruction appendFile WriteArgs", frame: in(KindAppendFile, WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: wireSHA}),
			wire: head + `"kind":"appendFile","args":{"path":"/w/a","contentLen":3,"sha256":"` + wireSHAHex + `"},"timeoutMs":30000}`},
		{name: "instruction writeFileGuarded WriteArgs minimal expect", frame: in(KindWriteFileGuarded, WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: wireSHA, Expect: &Expect{CanonicalPath: "/w/a"}}),
			wire: head + `"kind":"writeFileGuarded","args":{"path":"/w/a","contentLen":3,"sha256":"` + wireSHAHex + `","expect":{"canonicalPath":"/w/a"}},"timeoutMs":30000}`},
		{name: "instruction writeFileGuarded WriteArgs full expect", frame: in(KindWriteFileGuarded, WriteArgs{Path: "/w/a", ContentLen: 3, SHA256: wireSHA, Expect: &Expect{CanonicalPath: "/w/a", FileID: "42", Exclusive: true, NoFollow: true}}),
			wire: head + `"kind":"writeFileGuarded","args":{"path":"/w/a","contentLen":3,"sha256":"` + wireSHAHex + `","expect":{"canonicalPath":"/w/a","fileId":"42","exclusive":true,"noFollow":true}},"timeoutMs":30000}`},
		{name: "instruction createDir DirArgs recursive", frame: in(KindCreateDir, DirArgs{Path: "/w/d", Recursive: ptr(true)}),
			wire: head + `"kind":"createDir","args":{"path":"/w/d","recursive":true},"timeoutMs":30000}`},
		{name: "instruction remove DirArgs recursive false is sent", frame: in(KindRemove, DirArgs{Path: "/w/d", Recursive: ptr(false)}),
			wire: head + `"kind":"remove","args":{"path":"/w/d","recursive":false},"timeoutMs":30000}`},
		{name: "instruction remove DirArgs bare", frame: in(KindRemove, DirArgs{Path: "/w/d"}),
			wire: head + `"kind":"remove","args":{"path":"/w/d"},"timeoutMs":30000}`},
		{name: "instruction createTempDir TempDirArgs empty", frame: in(KindCreateTempDir, TempDirArgs{}),
			wire: head + `"kind":"createTempDir","args":{},"timeoutMs":30000}`},
		{name: "instruction createTempDir TempDirArgs prefix", frame: in(KindCreateTempDir, TempDirArgs{Prefix: "tmp-"}),
			wire: head + `"kind":"createTempDir","args":{"prefix":"tmp-"},"timeoutMs":30000}`},
		{name: "instruction createTempFile TempFileArgs", frame: in(KindCreateTempFile, TempFileArgs{Prefix: "p", Suffix: ".txt"}),
			wire: head + `"kind":"createTempFile","args":{"prefix":"p","suffix":".txt"},"timeoutMs":30000}`},
		{name: "instruction createTempFile TempFileArgs empty", frame: in(KindCreateTempFile, TempFileArgs{}),
			wire: head + `"kind":"createTempFile","args":{},"timeoutMs":30000}`},
		{name: "instruction statBatch StatBatchArgs", frame: in(KindStatBatch, StatBatchArgs{Paths: []string{"/a", "/b"}}),
			wire: head + `"kind":"statBatch","args":{"paths":["/a","/b"]},"timeoutMs":30000}`},
		{name: "instruction statBatch StatBatchArgs nil paths", frame: in(KindStatBatch, StatBatchArgs{}),
			wire:    head + `"kind":"statBatch","args":{"paths":[]},"timeoutMs":30000}`,
			decoded: in(KindStatBatch, StatBatchArgs{Paths: []string{}})},
		{name: "payload begin", frame: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartBegin, TotalLen: 3, SHA256: wireSHA},
			wire: `{"t":"payload","gen":"7","instructionId":"ins_1","part":"begin","totalLen":3,"sha256":"` + wireSHAHex + `"}`},
		{name: "payload chunk", frame: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Offset: 0, Data: []byte("abc")},
			wire: `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":0,"dataB64":"YWJj"}`},
		{name: "payload chunk binary at offset", frame: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Offset: 262144, Data: []byte{0xfb, 0xff}},
			wire: `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":262144,"dataB64":"+/8="}`},
		{name: "payload chunk empty data", frame: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Offset: 3},
			wire:    `{"t":"payload","gen":"7","instructionId":"ins_1","part":"chunk","offset":3,"dataB64":""}`,
			decoded: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartChunk, Offset: 3, Data: []byte{}}},
		{name: "payload commit", frame: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartCommit, TotalLen: 3, SHA256: wireSHA},
			wire: `{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":"` + wireSHAHex + `"}`},
		{name: "payload commit empty content", frame: &Payload{Gen: 0, InstructionID: "ins_1", Part: PartCommit, TotalLen: 0, SHA256: Digest(sha256.Sum256(nil))},
			wire: `{"t":"payload","gen":"0","instructionId":"ins_1","part":"commit","totalLen":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`},
		{name: "payload begin ignores chunk fields", frame: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartBegin, TotalLen: 3, SHA256: wireSHA, Offset: 5, Data: []byte("x")},
			wire:    `{"t":"payload","gen":"7","instructionId":"ins_1","part":"begin","totalLen":3,"sha256":"` + wireSHAHex + `"}`,
			decoded: &Payload{Gen: 7, InstructionID: "ins_1", Part: PartBegin, TotalLen: 3, SHA256: wireSHA}},
		{name: "cancel", frame: &Cancel{Gen: 7, InstructionID: "ins_1"},
			wire: `{"t":"cancel","gen":"7","instructionId":"ins_1"}`},
		{name: "resultAck", frame: &ResultAck{Gen: 7, InstructionID: "ins_1"},
			wire: `{"t":"resultAck","gen":"7","instructionId":"ins_1"}`},
		{name: "resultAck max gen, a quote and U+2028 in the id", frame: &ResultAck{Gen: 1<<64 - 1, InstructionID: "ins_\"é\u2028"},
			wire: "{\"t\":\"resultAck\",\"gen\":\"18446744073709551615\",\"instructionId\":\"ins_\\\"é\u2028\"}"},
		{name: "chunkAck", frame: &ChunkAck{Gen: 7, InstructionID: "ins_1", UpToStreamSeq: 12},
			wire: `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":12}`},
		{name: "chunkAck nothing yet", frame: &ChunkAck{Gen: 7, InstructionID: "ins_1", UpToStreamSeq: -1},
			wire: `{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":-1}`},
		{name: "bye revoked", frame: &Bye{Gen: 7, Reason: ByeRevoked},
			wire: `{"t":"bye","gen":"7","reason":"revoked"}`},
		{name: "bye draining", frame: &Bye{Gen: 7, Reason: ByeDraining},
			wire: `{"t":"bye","gen":"7","reason":"draining"}`},
		{name: "bye superseded", frame: &Bye{Gen: 7, Reason: ByeSuperseded},
			wire: `{"t":"bye","gen":"7","reason":"superseded"}`},
		{name: "ping", frame: &Ping{}, wire: `{"t":"ping"}`},
	}
}

func TestServerFrameWireForm(t *testing.T) {
	for _, tt := range serverWireCases() {
		t.Run(tt.name, func(t *testing.T) {
			assertWire(t, tt.frame.(wireMarshaler), tt.wire)
			assertTFirst(t, []byte(tt.wire), string(tt.frame.Type()))
		})
	}
}

func TestServerFrameRoundTrip(t *testing.T) {
	for _, tt := range serverWireCases() {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeServerFrame(TextMessage, b)
			if err != nil {
				t.Fatalf("DecodeServerFrame(%s): %v", b, err)
			}
			want := tt.decoded
			if want == nil {
				want = tt.frame
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip of %s\n got %#v\nwant %#v", b, got, want)
			}
		})
	}
}

// Map members are sorted every time, not by luck of one map iteration.
