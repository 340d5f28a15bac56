package protocol

import (
	"fmt"
	"reflect"
	"testing"
)

// --- accepted frames ----------------------------------------------------------------------

// §2.2: a valid frame of every device frame type decodes to exactly its value.
func TestEveryDeviceFrameTypeDecodes(t *testing.T) {
	withResuming := ddHelloWant()
	withResuming.Resuming = &Resuming{UnackedResults: 2}
	noSupports := ddHelloWant()
	noSupports.Supports = []InstructionKind{}

	cases := []struct {
		name  string
		frame string
		want  DeviceFrame
	}{
		{"hello", ddHello().String(), ddHelloWant()},
		{"hello resuming", ddHello().set("resuming", `{"unackedResults":2}`).String(), withResuming},
		{"hello with empty supports", ddHello().set("supports", `[]`).String(), noSupports},
		{"generationAck", ddGenAck().String(), &GenerationAck{Gen: 7}},
		{"heartbeat", ddHeartbeat().String(), &Heartbeat{Gen: 7, Seq: 3, Inflight: []string{ddInsID}}},
		{"heartbeat with nothing in flight", ddHeartbeat().set("inflight", `[]`).String(), &Heartbeat{Gen: 7, Seq: 3, Inflight: []string{}}},
		{"heartbeat with two in flight", ddHeartbeat().set("inflight", `["ins_a","ins_b"]`).String(), &Heartbeat{Gen: 7, Seq: 3, Inflight: []string{"ins_a", "ins_b"}}},
		{"result", ddResult(`{"ok":true,"kind":"void"}`).String(), &Result{Gen: 7, InstructionID: ddInsID, DeviceSeq: 0, Outcome: VoidOutcome{}}},
		{"stdout chunk", ddStdout().String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 0, Kind: ChunkStdout, Data: []byte("hi")}},
		{"stderr chunk", ddStdout().set("kind", `"stderr"`).set("streamSeq", `5`).set("dataB64", `"ZXJyCg=="`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 5, Kind: ChunkStderr, Data: []byte("err\n")}},
		{"data chunk of binary bytes", ddStdout().set("kind", `"data"`).set("dataB64", `"AP+AfwE="`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: ChunkData, Data: []byte{0x00, 0xff, 0x80, 0x7f, 0x01}}},
		{"stdout chunk with empty data", ddStdout().set("dataB64", `""`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: ChunkStdout, Data: []byte{}}},
		{"exit chunk", ddExit().String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 1, Kind: ChunkExit, ExitCode: 0}},
		{"exit chunk with a negative exitCode", ddExit().set("exitCode", `-1`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 1, Kind: ChunkExit, ExitCode: -1}},
		{"exit chunk with exitCode 137", ddExit().set("exitCode", `137`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 1, Kind: ChunkExit, ExitCode: 137}},
		{"goodbye", ddGoodbye().String(), &Goodbye{Gen: 7, Reason: GoodbyeShutdown, GraceMs: ptr(int64(1000))}},
		{"goodbye without graceMs", ddGoodbye().without("graceMs").String(), &Goodbye{Gen: 7, Reason: GoodbyeShutdown}},
		{"goodbye with graceMs 0", ddGoodbye().set("graceMs", `0`).set("reason", `"sleep"`).String(), &Goodbye{Gen: 7, Reason: GoodbyeSleep, GraceMs: ptr(int64(0))}},
		{"frame with whitespace around and inside", " \n\t{ \"t\" : \"generationAck\" ,\r\n \"gen\" : \"7\" } \n", &GenerationAck{Gen: 7}},
		{"t spelled with an escape", `{"t":"gener\u0061tionAck","gen":"7"}`, &GenerationAck{Gen: 7}},
	}
	seen := map[DeviceFrameType]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ddExpectFrame(t, c.frame, c.want)
			if got := ddDecode(t, c.frame).Type(); got != c.want.Type() {
				t.Errorf("Type() = %s, want %s", got, c.want.Type())
			}
		})
		seen[c.want.Type()] = true
	}
	for _, ft := range DeviceFrameTypes() {
		if !seen[ft] {
			t.Errorf("no accepted example of device frame type %s", ft)
		}
	}

	t.Run("hello decodes within the pre-auth cap", func(t *testing.T) {
		f, err := DecodeDeviceFrame(TextMessage, []byte(ddHello().String()), DeviceFrameLimit(false))
		if err != nil || !reflect.DeepEqual(f, ddHelloWant()) {
			t.Errorf("pre-auth hello: %#v, %v", ddDeref(f), err)
		}
	})
}

// §3.3: every outcome arm decodes to its Go value.
func TestEveryOutcomeArmDecodes(t *testing.T) {
	fi := ddInfoWant()
	dir := FileInfo{Path: "/w/d", Kind: FileKindDir, Size: 0, MtimeMs: -5}
	cases := []struct {
		name    string
		outcome string
		want    Outcome
	}{
		{"exec", `{"ok":true,"kind":"exec","exitCode":0}`, ExecOutcome{ExitCode: 0}},
		{"exec negative exitCode", `{"ok":true,"kind":"exec","exitCode":-2}`, ExecOutcome{ExitCode: -2}},
		{"exec truncated", `{"ok":true,"kind":"exec","exitCode":1,"truncated":{"stdout":true,"stderr":false}}`, ExecOutcome{ExitCode: 1, Truncated: &Truncated{Stdout: true}}},
		{"exec truncated stderr", `{"ok":true,"kind":"exec","exitCode":1,"truncated":{"stdout":false,"stderr":true}}`, ExecOutcome{ExitCode: 1, Truncated: &Truncated{Stderr: true}}},
		{"exec truncated empty", `{"ok":true,"kind":"exec","exitCode":0,"truncated":{}}`, ExecOutcome{Truncated: &Truncated{}}},
		{"read", `{"ok":true,"kind":"read"}`, ReadOutcome{}},
		{"stat info", `{"ok":true,"kind":"stat","info":` + ddInfo + `}`, StatOutcome{Info: &fi}},
		{"stat info without mode", `{"ok":true,"kind":"stat","info":{"path":"/w/d","kind":"dir","size":0,"mtimeMs":-5}}`, StatOutcome{Info: &dir}},
		{"stat entries", `{"ok":true,"kind":"stat","entries":[` + ddInfo + `,{"path":"/w/d","kind":"dir","size":0,"mtimeMs":-5}]}`, StatOutcome{Entries: []FileInfo{fi, dir}}},
		{"stat entries empty", `{"ok":true,"kind":"stat","entries":[]}`, StatOutcome{Entries: []FileInfo{}}},
		{"stat existsValue true", `{"ok":true,"kind":"stat","existsValue":true}`, StatOutcome{ExistsValue: ptr(true)}},
		{"stat existsValue false", `{"ok":true,"kind":"stat","existsValue":false}`, StatOutcome{ExistsValue: ptr(false)}},
		{"stat canonicalPath", `{"ok":true,"kind":"stat","canonicalPath":"/w/real"}`, StatOutcome{CanonicalPath: "/w/real"}},
		{"stat linkTarget", `{"ok":true,"kind":"stat","linkTarget":"/w/target"}`, StatOutcome{LinkTarget: &LinkTarget{IsSymlink: true, Target: "/w/target"}}},
		{"stat linkTarget relative", `{"ok":true,"kind":"stat","linkTarget":"../t"}`, StatOutcome{LinkTarget: &LinkTarget{IsSymlink: true, Target: "../t"}}},
		{"stat linkTarget null", `{"ok":true,"kind":"stat","linkTarget":null}`, StatOutcome{LinkTarget: &LinkTarget{IsSymlink: false}}},
		{"stat with nothing", `{"ok":true,"kind":"stat"}`, StatOutcome{}},
		{"stat with every field", `{"ok":true,"kind":"stat","info":` + ddInfo + `,"entries":[],"existsValue":false,"canonicalPath":"/w/a.txt","linkTarget":null}`,
			StatOutcome{Info: &fi, Entries: []FileInfo{}, ExistsValue: ptr(false), CanonicalPath: "/w/a.txt", LinkTarget: &LinkTarget{}}},
		{"write", `{"ok":true,"kind":"write","canonicalPath":"/w/a","inode":"1234","created":true}`, WriteOutcome{CanonicalPath: "/w/a", Inode: "1234", Created: ptr(true)}},
		{"write created false", `{"ok":true,"kind":"write","canonicalPath":"/w/a","created":false}`, WriteOutcome{CanonicalPath: "/w/a", Created: ptr(false)}},
		{"write only canonicalPath", `{"ok":true,"kind":"write","canonicalPath":"/w/a"}`, WriteOutcome{CanonicalPath: "/w/a"}},
		{"void", `{"ok":true,"kind":"void"}`, VoidOutcome{}},
		{"cancelled not_started", `{"ok":true,"kind":"cancelled","state":"not_started"}`, CancelledOutcome{State: CancelNotStarted}},
		{"cancelled killed", `{"ok":true,"kind":"cancelled","state":"killed"}`, CancelledOutcome{State: CancelKilled}},
		{"failure", `{"ok":false,"errorCode":"not_found","message":"no such file: /w/a"}`, Failure{ErrorCode: ErrNotFound, Message: "no such file: /w/a"}},
		{"failure with an escaped message", `{"ok":false,"errorCode":"unknown","message":"line\n\"two\" \u00e9"}`, Failure{ErrorCode: ErrUnknown, Message: "line\n\"two\" é"}},
	}
	for _, code := range ErrorCodes() {
		cases = append(cases, struct {
			name    string
			outcome string
			want    Outcome
		}{"failure " + string(code), `{"ok":false,"errorCode":"` + string(code) + `","message":"m"}`, Failure{ErrorCode: code, Message: "m"}})
	}
	seen := map[OutcomeKind]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ddExpectFrame(t, ddResult(c.outcome).set("deviceSeq", `4`).String(), &Result{Gen: 7, InstructionID: ddInsID, DeviceSeq: 4, Outcome: c.want})
		})
		seen[c.want.Kind()] = true
	}
	for _, k := range append(OutcomeKinds(), "") {
		if !seen[k] {
			t.Errorf("no accepted example of outcome arm %q", k)
		}
	}

	t.Run("existsValue false is a non-nil false", func(t *testing.T) {
		st := ddOutcomeOf(ddDecode(t, ddResult(`{"ok":true,"kind":"stat","existsValue":false}`).String())).(StatOutcome)
		if st.ExistsValue == nil || *st.ExistsValue {
			t.Errorf("ExistsValue = %v, want a non-nil false", st.ExistsValue)
		}
	})
	t.Run("linkTarget null is not-a-symlink, not absent", func(t *testing.T) {
		st := ddOutcomeOf(ddDecode(t, ddResult(`{"ok":true,"kind":"stat","linkTarget":null}`).String())).(StatOutcome)
		if st.LinkTarget == nil || st.LinkTarget.IsSymlink || st.LinkTarget.Target != "" {
			t.Errorf("LinkTarget = %#v, want &LinkTarget{IsSymlink:false}", st.LinkTarget)
		}
	})
	t.Run("entries [] is a non-nil empty listing", func(t *testing.T) {
		st := ddOutcomeOf(ddDecode(t, ddResult(`{"ok":true,"kind":"stat","entries":[]}`).String())).(StatOutcome)
		if st.Entries == nil || len(st.Entries) != 0 {
			t.Errorf("Entries = %#v, want a non-nil empty slice", st.Entries)
		}
	})
	t.Run("an empty stdout chunk has non-nil empty Data", func(t *testing.T) {
		c := ddDecode(t, ddStdout().set("dataB64", `""`).String()).(*Chunk)
		if c.Data == nil || len(c.Data) != 0 {
			t.Errorf("Data = %#v, want a non-nil empty slice", c.Data)
		}
	})
}

// §3.2/§8 and the decoder's contract: members the schema does not name are
// ignored, at every level, whatever their value.
func TestUnknownMembersAreIgnoredAtEveryLevel(t *testing.T) {
	extras := []ddKV{
		{"future", `"x"`},
		{"futureNumber", `1.5`},
		{"futureBig", `18446744073709551616`},
		{"futureNull", `null`},
		{"futureBase64", `"not base64!"`},
		{"futureGen", `"007"`},
		{"futureNested", `{"a":[1,{"b":null}],"c":{"d":true}}`},
		{"T", `"heartbeat"`},
		{"", `0`},
	}
	extend := func(f ddFields) ddFields {
		for _, e := range extras {
			f = f.set(e.k, e.v)
		}
		return f
	}
	// Extras before the known members, too.
	prepend := func(f ddFields) ddFields { return append(extend(nil), f...) }

	infoX := extend(ddInfoFields()).String()
	withResuming := ddHelloWant()
	withResuming.Resuming = &Resuming{UnackedResults: 2}
	fi := ddInfoWant()

	cases := []struct {
		name  string
		frame string
		want  DeviceFrame
	}{
		{"hello top level", extend(ddHello()).String(), ddHelloWant()},
		{"hello top level, extras first", prepend(ddHello()).String(), ddHelloWant()},
		{"hello platform and resuming", ddHello().set("platform", extend(ddPlatform()).String()).set("resuming", extend(ddFields{{"unackedResults", `2`}}).String()).String(), withResuming},
		{"generationAck", extend(ddGenAck()).String(), &GenerationAck{Gen: 7}},
		{"generationAck, extras first", prepend(ddGenAck()).String(), &GenerationAck{Gen: 7}},
		{"heartbeat", extend(ddHeartbeat()).String(), &Heartbeat{Gen: 7, Seq: 3, Inflight: []string{ddInsID}}},
		{"result top level and outcome", extend(ddResult(extend(ddFields{{"ok", `true`}, {"kind", `"void"`}}).String())).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: VoidOutcome{}}},
		{"failure outcome", ddResult(extend(ddFields{{"ok", `false`}, {"errorCode", `"timeout"`}, {"message", `"killed after 30s"`}}).String()).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: Failure{ErrorCode: ErrTimeout, Message: "killed after 30s"}}},
		{"exec outcome and truncated", ddResult(extend(ddFields{{"ok", `true`}, {"kind", `"exec"`}, {"exitCode", `3`}, {"truncated", extend(ddFields{{"stdout", `true`}}).String()}}).String()).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: ExecOutcome{ExitCode: 3, Truncated: &Truncated{Stdout: true}}}},
		{"stat outcome, info and entries", ddResult(extend(ddFields{{"ok", `true`}, {"kind", `"stat"`}, {"info", infoX}, {"entries", `[` + infoX + `]`}}).String()).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: StatOutcome{Info: &fi, Entries: []FileInfo{fi}}}},
		{"write outcome", ddResult(extend(ddFields{{"ok", `true`}, {"kind", `"write"`}, {"canonicalPath", `"/w/a"`}}).String()).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: WriteOutcome{CanonicalPath: "/w/a"}}},
		{"cancelled outcome", ddResult(extend(ddFields{{"ok", `true`}, {"kind", `"cancelled"`}, {"state", `"not_started"`}}).String()).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: CancelledOutcome{State: CancelNotStarted}}},
		{"stdout chunk", extend(ddStdout()).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: ChunkStdout, Data: []byte("hi")}},
		{"exit chunk", extend(ddExit()).String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 1, Kind: ChunkExit}},
		{"goodbye", extend(ddGoodbye()).String(), &Goodbye{Gen: 7, Reason: GoodbyeShutdown, GraceMs: ptr(int64(1000))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ddExpectFrame(t, c.frame, c.want)
		})
	}
}

// DecodeDeviceFrame's contract: the returned frame does not alias data, so a
// reader may reuse its buffer.
func TestDecodedFrameDoesNotAliasInput(t *testing.T) {
	fi := ddInfoWant()
	cases := []struct {
		name  string
		frame string
		want  DeviceFrame
	}{
		{"hello", ddHello().set("resuming", `{"unackedResults":2}`).String(), func() DeviceFrame {
			h := ddHelloWant()
			h.Resuming = &Resuming{UnackedResults: 2}
			return h
		}()},
		{"hello with escapes", ddHello().set("deviceId", `"dev_\u0041"`).set("workspaceRoot", `"/w\/x"`).String(), func() DeviceFrame {
			h := ddHelloWant()
			h.DeviceID = "dev_A"
			h.WorkspaceRoot = "/w/x"
			return h
		}()},
		{"heartbeat", ddHeartbeat().String(), &Heartbeat{Gen: 7, Seq: 3, Inflight: []string{ddInsID}}},
		{"stdout chunk", ddStdout().set("dataB64", `"aGVsbG8gd29ybGQ="`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: ChunkStdout, Data: []byte("hello world")}},
		{"empty chunk", ddStdout().set("dataB64", `""`).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: ChunkStdout, Data: []byte{}}},
		{"stat result", ddResult(`{"ok":true,"kind":"stat","info":` + ddInfo + `,"entries":[` + ddInfo + `],"canonicalPath":"/w/real","linkTarget":"/w/target"}`).String(),
			&Result{Gen: 7, InstructionID: ddInsID, Outcome: StatOutcome{Info: &fi, Entries: []FileInfo{fi}, CanonicalPath: "/w/real", LinkTarget: &LinkTarget{IsSymlink: true, Target: "/w/target"}}}},
		{"write result", ddResult(`{"ok":true,"kind":"write","canonicalPath":"/w/a","inode":"99"}`).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: WriteOutcome{CanonicalPath: "/w/a", Inode: "99"}}},
		{"failure result", ddResult(`{"ok":false,"errorCode":"not_found","message":"no such file"}`).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: Failure{ErrorCode: ErrNotFound, Message: "no such file"}}},
		{"cancelled result", ddResult(`{"ok":true,"kind":"cancelled","state":"killed"}`).String(), &Result{Gen: 7, InstructionID: ddInsID, Outcome: CancelledOutcome{State: CancelKilled}}},
		{"goodbye", ddGoodbye().set("reason", `"user_stop"`).String(), &Goodbye{Gen: 7, Reason: GoodbyeUserStop, GraceMs: ptr(int64(1000))}},
	}
	for _, c := range cases {
		for _, fill := range []byte{'X', 0, 0xff} {
			t.Run(fmt.Sprintf("%s/fill %#x", c.name, fill), func(t *testing.T) {
				buf := []byte(c.frame)
				f, err := DecodeDeviceFrame(TextMessage, buf, DeviceFrameLimit(true))
				if err != nil {
					t.Fatal(err)
				}
				for i := range buf {
					buf[i] = fill
				}
				if !reflect.DeepEqual(f, withDataB64(c.want)) {
					t.Errorf("after overwriting the input, the frame is\n%#v\nwant\n%#v", ddDeref(f), ddDeref(c.want))
				}
			})
		}
	}

	t.Run("writing the decoded data does not reach the input", func(t *testing.T) {
		orig := ddStdout().String()
		buf := []byte(orig)
		f, err := DecodeDeviceFrame(TextMessage, buf, DeviceFrameLimit(true))
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.(*Chunk).Data {
			f.(*Chunk).Data[i] = '!'
		}
		if string(buf) != orig {
			t.Errorf("input became %q after writing the decoded Data", buf)
		}
	})
}
