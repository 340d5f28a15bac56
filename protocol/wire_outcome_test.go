package protocol

import (
	"bytes"
	"crypto/sha256"
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
