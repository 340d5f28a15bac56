package protocol

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// The wire form of every frame and outcome arm (§1.4, §1.5, §2.2, §2.3, §3.1,
// §3.3–§3.5, §4), compared byte for byte against literal strings.

// wireMarshaler is what every frame and outcome implements.
type wireMarshaler interface {
	MarshalJSON() ([]byte, error)
}

// wireSHA is sha256("abc"); §3.4 puts it on the wire as lower-case hex.
var wireSHA = Digest(sha256.Sum256([]byte("abc")))

const wireSHAHex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

// assertWire checks that both json.Marshal and the value's own MarshalJSON
// produce exactly want.
func assertWire(t *testing.T, v wireMarshaler, want string) {
	t.Helper()
	own, err := v.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	if string(own) != want {
		t.Errorf("MarshalJSON\n got %s\nwant %s", own, want)
	}
	viaJSON, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if string(viaJSON) != want {
		t.Errorf("json.Marshal\n got %s\nwant %s", viaJSON, want)
	}
}

// assertTFirst checks that t is the first member and names the frame's type.
func assertTFirst(t *testing.T, b []byte, typ string) {
	t.Helper()
	prefix := `{"t":"` + typ + `"`
	if !bytes.HasPrefix(b, []byte(prefix)) {
		t.Errorf("frame does not begin with %s: %s", prefix, b)
	}
}

type outcomeWireCase struct {
	name string
	o    Outcome
	wire string
}

// outcomeWireCases covers every §3.3 arm, and every single field of the stat
// arm.
func outcomeWireCases() []outcomeWireCase {
	return []outcomeWireCase{
		{"exec", ExecOutcome{ExitCode: 0},
			`{"ok":true,"kind":"exec","exitCode":0}`},
		{"exec nonzero exit", ExecOutcome{ExitCode: 137},
			`{"ok":true,"kind":"exec","exitCode":137}`},
		{"exec negative exit", ExecOutcome{ExitCode: -1},
			`{"ok":true,"kind":"exec","exitCode":-1}`},
		{"exec truncated", ExecOutcome{ExitCode: 2, Truncated: &Truncated{Stdout: true}},
			`{"ok":true,"kind":"exec","exitCode":2,"truncated":{"stdout":true,"stderr":false}}`},
		{"exec truncated stderr", ExecOutcome{ExitCode: 0, Truncated: &Truncated{Stderr: true}},
			`{"ok":true,"kind":"exec","exitCode":0,"truncated":{"stdout":false,"stderr":true}}`},
		{"read", ReadOutcome{},
			`{"ok":true,"kind":"read"}`},
		{"stat info", StatOutcome{Info: &FileInfo{Path: "/w/a", Kind: FileKindFile, Size: 3, MtimeMs: 1700000000000, Mode: ptr(uint32(0o644))}},
			`{"ok":true,"kind":"stat","info":{"path":"/w/a","kind":"file","size":3,"mtimeMs":1700000000000,"mode":420}}`},
		{"stat info without mode", StatOutcome{Info: &FileInfo{Path: "/w", Kind: FileKindDir}},
			`{"ok":true,"kind":"stat","info":{"path":"/w","kind":"dir","size":0,"mtimeMs":0}}`},
		{"stat entries empty", StatOutcome{Entries: []FileInfo{}},
			`{"ok":true,"kind":"stat","entries":[]}`},
		{"stat entries", StatOutcome{Entries: []FileInfo{
			{Path: "/w/a", Kind: FileKindFile, Size: 3, MtimeMs: 1700000000000, Mode: ptr(uint32(0o644))},
			{Path: "/w/l", Kind: FileKindSymlink, Size: 5, MtimeMs: 1},
			{Path: "/w/p", Kind: FileKindOther, Size: 0, MtimeMs: 2, Mode: ptr(uint32(0))},
		}},
			`{"ok":true,"kind":"stat","entries":[{"path":"/w/a","kind":"file","size":3,"mtimeMs":1700000000000,"mode":420},{"path":"/w/l","kind":"symlink","size":5,"mtimeMs":1},{"path":"/w/p","kind":"other","size":0,"mtimeMs":2,"mode":0}]}`},
		{"stat existsValue true", StatOutcome{ExistsValue: ptr(true)},
			`{"ok":true,"kind":"stat","existsValue":true}`},
		{"stat existsValue false", StatOutcome{ExistsValue: ptr(false)},
			`{"ok":true,"kind":"stat","existsValue":false}`},
		{"stat canonicalPath", StatOutcome{CanonicalPath: "/w/a"},
			`{"ok":true,"kind":"stat","canonicalPath":"/w/a"}`},
		{"stat linkTarget symlink", StatOutcome{LinkTarget: &LinkTarget{IsSymlink: true, Target: "/w/target"}},
			`{"ok":true,"kind":"stat","linkTarget":"/w/target"}`},
		{"stat linkTarget relative symlink", StatOutcome{LinkTarget: &LinkTarget{IsSymlink: true, Target: "../t"}},
			`{"ok":true,"kind":"stat","linkTarget":"../t"}`},
		{"stat linkTarget not a symlink", StatOutcome{LinkTarget: &LinkTarget{}},
			`{"ok":true,"kind":"stat","linkTarget":null}`},
		{"stat nothing", StatOutcome{},
			`{"ok":true,"kind":"stat"}`},
		{"write", WriteOutcome{CanonicalPath: "/w/a"},
			`{"ok":true,"kind":"write","canonicalPath":"/w/a"}`},
		{"write inode and created", WriteOutcome{CanonicalPath: "/w/a", Inode: "42", Created: ptr(true)},
			`{"ok":true,"kind":"write","canonicalPath":"/w/a","inode":"42","created":true}`},
		{"write created false", WriteOutcome{CanonicalPath: "/w/a", Created: ptr(false)},
			`{"ok":true,"kind":"write","canonicalPath":"/w/a","created":false}`},
		{"write inode only", WriteOutcome{CanonicalPath: "/w/a", Inode: "0"},
			`{"ok":true,"kind":"write","canonicalPath":"/w/a","inode":"0"}`},
		{"void", VoidOutcome{},
			`{"ok":true,"kind":"void"}`},
		{"cancelled not_started", CancelledOutcome{State: CancelNotStarted},
			`{"ok":true,"kind":"cancelled","state":"not_started"}`},
		{"cancelled killed", CancelledOutcome{State: CancelKilled},
			`{"ok":true,"kind":"cancelled","state":"killed"}`},
		{"failure", Failure{ErrorCode: ErrNotFound, Message: "no such file: /w/a"},
			`{"ok":false,"errorCode":"not_found","message":"no such file: /w/a"}`},
		{"failure quoted message", Failure{ErrorCode: ErrOutcomeUnknown, Message: "lost \"x\"\n"},
			`{"ok":false,"errorCode":"outcome_unknown","message":"lost \"x\"\n"}`},
	}
}

func TestOutcomeWireForm(t *testing.T) {
	for _, tt := range outcomeWireCases() {
		t.Run(tt.name, func(t *testing.T) {
			assertWire(t, tt.o.(wireMarshaler), tt.wire)
		})
	}
}

// Every error code and cancel state is a member of its closed set, and each
// encodes as itself.
func TestOutcomeClosedSetMembersEncode(t *testing.T) {
	for _, c := range ErrorCodes() {
		assertWire(t, Failure{ErrorCode: c, Message: "m"}, `{"ok":false,"errorCode":"`+string(c)+`","message":"m"}`)
	}
	for _, s := range CancelStates() {
		assertWire(t, CancelledOutcome{State: s}, `{"ok":true,"kind":"cancelled","state":"`+string(s)+`"}`)
	}
}

type deviceWireCase struct {
	name  string
	frame DeviceFrame
	wire  string
	// decoded is what DecodeDeviceFrame returns for wire when it is not
	// frame itself (a nil slice comes back empty).
	decoded DeviceFrame
}

func deviceWireCases() []deviceWireCase {
	cases := []deviceWireCase{
		{name: "hello", frame: &Hello{
			ProtocolVersion: 1, DeviceID: "dev_01J8ZQ4T9X0000000000000000", Epoch: "01J8ZQ4T9X7M3K5N6P8R0S2V4W",
			SignatureB64: "c2ln", Platform: Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "0.1.0"},
			WorkspaceRoot: "/home/u/w", PathFlavor: "posix", Supports: []InstructionKind{KindExec, KindExists, "futureKind"},
			Resuming: &Resuming{UnackedResults: 2},
		}, wire: `{"t":"hello","protocolVersion":1,"deviceId":"dev_01J8ZQ4T9X0000000000000000","epoch":"01J8ZQ4T9X7M3K5N6P8R0S2V4W","signatureB64":"c2ln","platform":{"os":"linux","arch":"amd64","executorVersion":"0.1.0"},"workspaceRoot":"/home/u/w","pathFlavor":"posix","supports":["exec","exists","futureKind"],"resuming":{"unackedResults":2}}`},
		{name: "hello without resuming", frame: &Hello{
			ProtocolVersion: 1, DeviceID: "dev_1", Epoch: "01J8ZQ4T9X7M3K5N6P8R0S2V4W", SignatureB64: "c2ln",
			Platform: Platform{OS: "darwin", Arch: "arm64", ExecutorVersion: "1"}, WorkspaceRoot: "/w", PathFlavor: "posix",
			Supports: []InstructionKind{},
		}, wire: `{"t":"hello","protocolVersion":1,"deviceId":"dev_1","epoch":"01J8ZQ4T9X7M3K5N6P8R0S2V4W","signatureB64":"c2ln","platform":{"os":"darwin","arch":"arm64","executorVersion":"1"},"workspaceRoot":"/w","pathFlavor":"posix","supports":[]}`},
		{name: "hello nil supports", frame: &Hello{
			ProtocolVersion: 1, DeviceID: "dev_1", Epoch: "01J8ZQ4T9X7M3K5N6P8R0S2V4W", SignatureB64: "c2ln",
			Platform: Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "1"}, WorkspaceRoot: "/w", PathFlavor: "posix",
			Resuming: &Resuming{},
		}, wire: `{"t":"hello","protocolVersion":1,"deviceId":"dev_1","epoch":"01J8ZQ4T9X7M3K5N6P8R0S2V4W","signatureB64":"c2ln","platform":{"os":"linux","arch":"amd64","executorVersion":"1"},"workspaceRoot":"/w","pathFlavor":"posix","supports":[],"resuming":{"unackedResults":0}}`,
			decoded: &Hello{
				ProtocolVersion: 1, DeviceID: "dev_1", Epoch: "01J8ZQ4T9X7M3K5N6P8R0S2V4W", SignatureB64: "c2ln",
				Platform: Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "1"}, WorkspaceRoot: "/w", PathFlavor: "posix",
				Supports: []InstructionKind{}, Resuming: &Resuming{},
			}},
		{name: "generationAck", frame: &GenerationAck{Gen: 7}, wire: `{"t":"generationAck","gen":"7"}`},
		{name: "generationAck gen 0", frame: &GenerationAck{Gen: 0}, wire: `{"t":"generationAck","gen":"0"}`},
		{name: "generationAck max gen", frame: &GenerationAck{Gen: math.MaxUint64}, wire: `{"t":"generationAck","gen":"18446744073709551615"}`},
		{name: "generationAck gen 10", frame: &GenerationAck{Gen: 10}, wire: `{"t":"generationAck","gen":"10"}`},
		{name: "heartbeat", frame: &Heartbeat{Gen: 7, Seq: 3, Inflight: []string{"ins_a", "ins_b"}},
			wire: `{"t":"heartbeat","gen":"7","seq":3,"inflight":["ins_a","ins_b"]}`},
		{name: "heartbeat nil inflight", frame: &Heartbeat{Gen: 7, Seq: 0},
			wire:    `{"t":"heartbeat","gen":"7","seq":0,"inflight":[]}`,
			decoded: &Heartbeat{Gen: 7, Seq: 0, Inflight: []string{}}},
		{name: "heartbeat empty inflight", frame: &Heartbeat{Gen: 7, Seq: 1, Inflight: []string{}},
			wire: `{"t":"heartbeat","gen":"7","seq":1,"inflight":[]}`},
		{name: "chunk stdout", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 0, Kind: ChunkStdout, Data: []byte("hello\n")},
			wire: `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":0,"kind":"stdout","dataB64":"aGVsbG8K"}`},
		{name: "chunk stdout empty data", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 1, Kind: ChunkStdout},
			wire:    `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":1,"kind":"stdout","dataB64":""}`,
			decoded: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 1, Kind: ChunkStdout, Data: []byte{}}},
		{name: "chunk stdout empty non-nil data", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 1, Kind: ChunkStdout, Data: []byte{}},
			wire: `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":1,"kind":"stdout","dataB64":""}`},
		{name: "chunk stdout never carries exitCode", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 1, Kind: ChunkStdout, Data: []byte("a"), ExitCode: 3},
			wire:    `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":1,"kind":"stdout","dataB64":"YQ=="}`,
			decoded: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 1, Kind: ChunkStdout, Data: []byte("a")}},
		{name: "chunk stderr", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 2, Kind: ChunkStderr, Data: []byte("ab")},
			wire: `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":2,"kind":"stderr","dataB64":"YWI="}`},
		{name: "chunk data binary", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 9007199254740991, Kind: ChunkData, Data: []byte{0xff, 0xfe, 0x00}},
			wire: `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":9007199254740991,"kind":"data","dataB64":"//4A"}`},
		{name: "chunk escaped instructionId", frame: &Chunk{Gen: 7, InstructionID: "a\"b\\", StreamSeq: 0, Kind: ChunkData, Data: []byte("abc")},
			wire: `{"t":"chunk","gen":"7","instructionId":"a\"b\\","streamSeq":0,"kind":"data","dataB64":"YWJj"}`},
		{name: "chunk exit", frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 3, Kind: ChunkExit, ExitCode: 0},
			wire: `{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":3,"kind":"exit","exitCode":0}`},
		{name: "chunk exit negative code", frame: &Chunk{Gen: 18446744073709551615, InstructionID: "ins_1", StreamSeq: 0, Kind: ChunkExit, ExitCode: -9},
			wire: `{"t":"chunk","gen":"18446744073709551615","instructionId":"ins_1","streamSeq":0,"kind":"exit","exitCode":-9}`},
		{name: "chunk exit with empty non-nil data", frame: &Chunk{Gen: 0, InstructionID: "ins_1", StreamSeq: 0, Kind: ChunkExit, Data: []byte{}, ExitCode: 1},
			wire:    `{"t":"chunk","gen":"0","instructionId":"ins_1","streamSeq":0,"kind":"exit","exitCode":1}`,
			decoded: &Chunk{Gen: 0, InstructionID: "ins_1", StreamSeq: 0, Kind: ChunkExit, ExitCode: 1}},
		{name: "goodbye", frame: &Goodbye{Gen: 7, Reason: GoodbyeShutdown},
			wire: `{"t":"goodbye","gen":"7","reason":"shutdown"}`},
		{name: "goodbye graceMs", frame: &Goodbye{Gen: 7, Reason: GoodbyeSleep, GraceMs: ptr(int64(5000))},
			wire: `{"t":"goodbye","gen":"7","reason":"sleep","graceMs":5000}`},
		{name: "goodbye graceMs zero is sent", frame: &Goodbye{Gen: 7, Reason: GoodbyeUserStop, GraceMs: ptr(int64(0))},
			wire: `{"t":"goodbye","gen":"7","reason":"user_stop","graceMs":0}`},
	}
	for _, oc := range outcomeWireCases() {
		cases = append(cases, deviceWireCase{
			name:  "result " + oc.name,
			frame: &Result{Gen: 7, InstructionID: "ins_1", DeviceSeq: 1, Outcome: oc.o},
			wire:  `{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":` + oc.wire + `}`,
		})
	}
	return cases
}

func TestDeviceFrameWireForm(t *testing.T) {
	for _, tt := range deviceWireCases() {
		t.Run(tt.name, func(t *testing.T) {
			assertWire(t, tt.frame.(wireMarshaler), tt.wire)
			assertTFirst(t, []byte(tt.wire), string(tt.frame.Type()))
		})
	}
}

func TestDeviceFrameRoundTrip(t *testing.T) {
	for _, tt := range deviceWireCases() {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeDeviceFrame(TextMessage, b, MaxFrameBytes)
			if err != nil {
				t.Fatalf("DecodeDeviceFrame(%s): %v", b, err)
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

// AppendJSON appends exactly the wire form to what is already there.
func TestChunkAndPayloadAppendJSON(t *testing.T) {
	c := &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 0, Kind: ChunkStdout, Data: []byte("hi")}
	b, err := c.AppendJSON([]byte("prefix:"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `prefix:{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":0,"kind":"stdout","dataB64":"aGk="}`; string(b) != want {
		t.Errorf("Chunk.AppendJSON\n got %s\nwant %s", b, want)
	}
	p := &Payload{Gen: 7, InstructionID: "ins_1", Part: PartCommit, TotalLen: 3, SHA256: wireSHA}
	b, err = p.AppendJSON([]byte("prefix:"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `prefix:{"t":"payload","gen":"7","instructionId":"ins_1","part":"commit","totalLen":3,"sha256":"` + wireSHAHex + `"}`; string(b) != want {
		t.Errorf("Payload.AppendJSON\n got %s\nwant %s", b, want)
	}
}

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
func TestMapKeysAreSortedOnEveryEncode(t *testing.T) {
	env := map[string]string{}
	marks := map[string]int64{}
	for _, k := range strings.Fields("q w e r t y u i o p a s d f g h j k l z x c v b n m") {
		env[k] = k
		marks["ins_"+k] = 1
	}
	wantEnv := `"shellEnv":{"a":"a","b":"b","c":"c","d":"d","e":"e","f":"f","g":"g","h":"h","i":"i","j":"j","k":"k","l":"l","m":"m","n":"n","o":"o","p":"p","q":"q","r":"r","s":"s","t":"t","u":"u","v":"v","w":"w","x":"x","y":"y","z":"z"}`
	wantMarks := `"chunkWatermarks":{"ins_a":1,"ins_b":1,"ins_c":1,"ins_d":1,"ins_e":1,"ins_f":1,"ins_g":1,"ins_h":1,"ins_i":1,"ins_j":1,"ins_k":1,"ins_l":1,"ins_m":1,"ins_n":1,"ins_o":1,"ins_p":1,"ins_q":1,"ins_r":1,"ins_s":1,"ins_t":1,"ins_u":1,"ins_v":1,"ins_w":1,"ins_x":1,"ins_y":1,"ins_z":1}`
	in := &Instruction{Gen: 1, InstructionID: "ins_1", RootSessionID: "s", Kind: KindExec, Args: CommandArgs{Command: "env"}, ShellEnv: env, TimeoutMs: 1}
	ack := &HelloAck{HeartbeatIntervalMs: 1, MaxInflight: 1, Gen: 1, ChunkWatermarks: marks}
	for range 20 {
		for _, c := range []struct {
			m    wireMarshaler
			want string
		}{{in, wantEnv}, {ack, wantMarks}} {
			own, err := c.m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			viaJSON, err := json.Marshal(c.m)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range [][]byte{own, viaJSON} {
				if !bytes.Contains(b, []byte(c.want)) {
					t.Fatalf("map members are not sorted: %s", b)
				}
			}
		}
	}
}

// The encoders refuse what the decoders would refuse.
func TestEncodersRefuseWhatTheDecodersRefuse(t *testing.T) {
	okIn := func(kind InstructionKind, args Args) *Instruction {
		return &Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "ses_1", Kind: kind, Args: args, TimeoutMs: 1}
	}
	result := func(o Outcome) *Result { return &Result{Gen: 7, InstructionID: "ins_1", DeviceSeq: 0, Outcome: o} }
	tests := []struct {
		name string
		v    wireMarshaler
		// set is the closed set named by the *UnknownMemberError, when the
		// refusal is a value outside one.
		set string
	}{
		{"exit chunk with data", &Chunk{Gen: 7, InstructionID: "ins_1", Kind: ChunkExit, Data: []byte("x")}, ""},
		{"unknown chunk kind", &Chunk{Gen: 7, InstructionID: "ins_1", Kind: "stdin", Data: []byte("x")}, "DEVICE_CHUNK_KINDS"},
		{"empty chunk kind", &Chunk{Gen: 7, InstructionID: "ins_1"}, "DEVICE_CHUNK_KINDS"},
		{"chunk kind in the wrong case", &Chunk{Gen: 7, InstructionID: "ins_1", Kind: "STDOUT"}, "DEVICE_CHUNK_KINDS"},
		{"unknown payload part", &Payload{Gen: 7, InstructionID: "ins_1", Part: "middle"}, "payload parts (§2.3)"},
		{"empty payload part", &Payload{Gen: 7, InstructionID: "ins_1"}, "payload parts (§2.3)"},
		{"goodbye reason outside the set", &Goodbye{Gen: 7, Reason: "crash"}, "DEVICE_GOODBYE_REASONS"},
		{"goodbye without reason", &Goodbye{Gen: 7}, "DEVICE_GOODBYE_REASONS"},
		{"bye reason outside the set", &Bye{Gen: 7, Reason: "bored"}, "DEVICE_BYE_REASONS"},
		{"bye without reason", &Bye{Gen: 7}, "DEVICE_BYE_REASONS"},
		{"helloReject code outside the set", &HelloReject{Code: "nope"}, "DEVICE_HELLO_REJECT_CODES"},
		{"helloReject without code", &HelloReject{}, "DEVICE_HELLO_REJECT_CODES"},
		{"failure code outside the set", Failure{ErrorCode: "oops", Message: "m"}, "DEVICE_OUTCOME_ERROR_CODES"},
		{"failure without code", Failure{Message: "m"}, "DEVICE_OUTCOME_ERROR_CODES"},
		{"cancelled state outside the set", CancelledOutcome{State: "paused"}, "DEVICE_CANCEL_STATES"},
		{"cancelled without state", CancelledOutcome{}, "DEVICE_CANCEL_STATES"},
		{"write outcome without canonicalPath", WriteOutcome{Inode: "42", Created: ptr(true)}, ""},
		{"result with nil outcome", result(nil), ""},
		{"result with a bad failure", result(Failure{ErrorCode: "oops", Message: "m"}), "DEVICE_OUTCOME_ERROR_CODES"},
		{"result with a bad cancelled state", result(CancelledOutcome{State: "paused"}), "DEVICE_CANCEL_STATES"},
		{"result with a write outcome without canonicalPath", result(WriteOutcome{}), ""},
		{"instruction exec with PathArgs", okIn(KindExec, PathArgs{Path: "/a"}), ""},
		{"instruction readTextFile with CommandArgs", okIn(KindReadTextFile, CommandArgs{Command: "cat /a"}), ""},
		{"instruction readTextLines with PathArgs", okIn(KindReadTextLines, PathArgs{Path: "/a"}), ""},
		{"instruction writeFileGuarded without expect", okIn(KindWriteFileGuarded, WriteArgs{Path: "/a", ContentLen: 1, SHA256: wireSHA}), ""},
		{"instruction writeFile with expect", okIn(KindWriteFile, WriteArgs{Path: "/a", ContentLen: 1, SHA256: wireSHA, Expect: &Expect{CanonicalPath: "/a"}}), ""},
		{"instruction writeFileExclusive with expect", okIn(KindWriteFileExclusive, WriteArgs{Path: "/a", SHA256: wireSHA, Expect: &Expect{CanonicalPath: "/a"}}), ""},
		{"instruction appendFile with expect", okIn(KindAppendFile, WriteArgs{Path: "/a", SHA256: wireSHA, Expect: &Expect{CanonicalPath: "/a"}}), ""},
		{"instruction createDir with TempDirArgs", okIn(KindCreateDir, TempDirArgs{}), ""},
		{"instruction createTempDir with TempFileArgs", okIn(KindCreateTempDir, TempFileArgs{}), ""},
		{"instruction statBatch with PathArgs", okIn(KindStatBatch, PathArgs{Path: "/a"}), ""},
		{"instruction unknown kind", okIn("teleport", PathArgs{Path: "/a"}), ""},
		{"instruction nil args", okIn(KindCreateTempDir, nil), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.v.MarshalJSON()
			if err == nil {
				t.Fatalf("MarshalJSON accepted it: %s", b)
			}
			if tt.set != "" {
				var ume *UnknownMemberError
				if !errors.As(err, &ume) || ume.Set != tt.set {
					t.Errorf("MarshalJSON error %v is not an UnknownMemberError of %s", err, tt.set)
				}
			}
			if b, err := json.Marshal(tt.v); err == nil {
				t.Errorf("json.Marshal accepted it: %s", b)
			}
		})
	}
}

// Every Args type fits exactly the kinds §3.1 gives it.
func TestArgsFitsOnlyItsKinds(t *testing.T) {
	fits := map[string][]InstructionKind{
		"CommandArgs":   {KindExec, KindExecStream},
		"PathArgs":      {KindReadTextFile, KindReadBinaryFile, KindFileInfo, KindListDir, KindCanonicalPath, KindExists, KindReadLink},
		"ReadLinesArgs": {KindReadTextLines},
		"WriteArgs":     {KindWriteFile, KindWriteFileExclusive, KindAppendFile},
		"GuardedArgs":   {KindWriteFileGuarded},
		"DirArgs":       {KindCreateDir, KindRemove},
		"TempDirArgs":   {KindCreateTempDir},
		"TempFileArgs":  {KindCreateTempFile},
		"StatBatchArgs": {KindStatBatch},
	}
	values := map[string]Args{
		"CommandArgs":   CommandArgs{Command: "x"},
		"PathArgs":      PathArgs{Path: "/a"},
		"ReadLinesArgs": ReadLinesArgs{Path: "/a"},
		"WriteArgs":     WriteArgs{Path: "/a"},
		"GuardedArgs":   WriteArgs{Path: "/a", Expect: &Expect{CanonicalPath: "/a"}},
		"DirArgs":       DirArgs{Path: "/a"},
		"TempDirArgs":   TempDirArgs{},
		"TempFileArgs":  TempFileArgs{},
		"StatBatchArgs": StatBatchArgs{Paths: []string{"/a"}},
	}
	covered := map[InstructionKind]int{}
	for name, a := range values {
		for _, k := range append(InstructionKinds(), "teleport", "") {
			want := false
			for _, f := range fits[name] {
				if f == k {
					want = true
				}
			}
			if want {
				covered[k]++
			}
			if got := ArgsFits(k, a); got != want {
				t.Errorf("ArgsFits(%q, %s) = %v, want %v", k, name, got, want)
			}
		}
	}
	for _, k := range InstructionKinds() {
		if covered[k] != 1 {
			t.Errorf("kind %s is fitted by %d Args values, want exactly 1", k, covered[k])
		}
		if ArgsFits(k, nil) {
			t.Errorf("ArgsFits(%s, nil) = true", k)
		}
	}
}

// An encoder refuses what the peer's decoder would refuse: a frame the lane
// refuses as bad_shape (§2.4) is a dropped result or a stream gap, which ends
// the instruction outcome_unknown. Each case is a value outside the spec's
// field rules (§2.2, §2.3, §3.3) that the encoder should refuse.
func TestEncodersNeverEmitARefusedFrame(t *testing.T) {
	tests := []struct {
		name  string
		frame wireMarshaler
	}{
		{name: "stat info kind outside the WireFileInfo kinds",
			frame: &Result{Gen: 7, InstructionID: "ins_1", Outcome: StatOutcome{Info: &FileInfo{Path: "/a", Kind: "weird"}}}},
		{name: "stat entry without kind",
			frame: &Result{Gen: 7, InstructionID: "ins_1", Outcome: StatOutcome{Entries: []FileInfo{{Path: "/a"}}}}},
		{name: "result with empty instructionId",
			frame: &Result{Gen: 7, Outcome: VoidOutcome{}}},
		{name: "chunk with negative streamSeq",
			frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: -1, Kind: ChunkData}},
		{name: "chunk with unsafe streamSeq",
			frame: &Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: 1 << 53, Kind: ChunkData}},
		{name: "heartbeat with negative seq",
			frame: &Heartbeat{Gen: 7, Seq: -1}},
		{name: "goodbye with negative graceMs",
			frame: &Goodbye{Gen: 7, Reason: GoodbyeSleep, GraceMs: ptr(int64(-5))}},
		{name: "chunkAck below -1",
			frame: &ChunkAck{Gen: 7, InstructionID: "ins_1", UpToStreamSeq: -2}},
		{name: "chunkAck with empty instructionId",
			frame: &ChunkAck{Gen: 7, UpToStreamSeq: 0}},
		{name: "resultAck with empty instructionId",
			frame: &ResultAck{Gen: 7}},
		{name: "resultAck with invalid UTF-8 in instructionId",
			frame: &ResultAck{Gen: 7, InstructionID: "ins_\xff"}},
		{name: "helloAck watermark below -1",
			frame: &HelloAck{HeartbeatIntervalMs: 15000, MaxInflight: 4, Gen: 7, PendingInstructions: []string{"ins_1"}, ChunkWatermarks: map[string]int64{"ins_1": -2}}},
		{name: "instruction with a relative cwd",
			frame: &Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "r", Kind: KindExec, Args: CommandArgs{Command: "true"}, Cwd: "w", TimeoutMs: 1}},
		{name: "instruction with a non-normalized path",
			frame: &Instruction{Gen: 7, InstructionID: "ins_1", RootSessionID: "r", Kind: KindExists, Args: PathArgs{Path: "/w/../etc"}, TimeoutMs: 1}},
		{name: "hello over the 4096-byte pre-auth cap",
			frame: &Hello{ProtocolVersion: 1, DeviceID: "dev_1", Epoch: "01J8ZQ4T9X7M3K5N6P8R0S2V4W", WorkspaceRoot: "/" + strings.Repeat("w", 4096)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.frame)
			if err == nil {
				t.Fatalf("the encoder emitted %s", b)
			}
		})
	}
}
