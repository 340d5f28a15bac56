package protocol

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

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
