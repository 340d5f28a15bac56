package protocol

import (
	"math"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

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
			want = withDataB64(want)
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
