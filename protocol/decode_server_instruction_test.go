package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

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
