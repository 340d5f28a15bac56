package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Tests for DecodeDeviceFrame against the spec's stage-1 parsing rules
// (§2.4), the device→server frame schemas (§2.2), the outcome arms (§3.3)
// and the chunk rules (§4). Every refusal is asserted by its exact reason,
// and every bad_shape refusal by the field it names.
//
// Helper names carry a dd prefix so they cannot collide with the other test
// files of the package.

const (
	ddDevID = "dev_01J8ZQ4T9X0000000000000000"
	ddInsID = "ins_01J8ZQ4T9X7M3K5N6P8R0S2V4W"
	ddEpoch = "01J8ZQ4T9X7M3K5N6P8R0S2V4W"

	// ddAnyField: the refusal is bad_shape, but which field it names is not
	// part of the contract (a duplicate name, or two faults at once).
	ddAnyField = "\x00any"

	maxSafe    = "9007199254740991"  // 2^53-1
	twoTo53    = "9007199254740992"  // 2^53
	negTwoTo53 = "-9007199254740992" // -2^53
)

// ddKV is one member of a JSON object under construction: a name and the raw
// JSON of its value.
type ddKV struct{ k, v string }

// ddFields is an ordered JSON object under construction. Its methods return
// copies, so one base can be varied freely.
type ddFields []ddKV

func (f ddFields) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", m.k, m.v)
	}
	b.WriteByte('}')
	return b.String()
}

// set replaces the first member named k, or appends it.
func (f ddFields) set(k, v string) ddFields {
	out := append(ddFields(nil), f...)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, ddKV{k, v})
}

func (f ddFields) without(k string) ddFields {
	var out ddFields
	for _, m := range f {
		if m.k != k {
			out = append(out, m)
		}
	}
	return out
}

// add appends a member even if the name is already present.
func (f ddFields) add(k, v string) ddFields {
	return append(append(ddFields(nil), f...), ddKV{k, v})
}

func ddQ(s string) string { return `"` + s + `"` }

func ddPlatform() ddFields {
	return ddFields{{"os", `"linux"`}, {"arch", `"amd64"`}, {"executorVersion", `"1.2.3"`}}
}

func ddHello() ddFields {
	return ddFields{
		{"t", `"hello"`},
		{"protocolVersion", `1`},
		{"deviceId", ddQ(ddDevID)},
		{"epoch", ddQ(ddEpoch)},
		{"signatureB64", `"c2lnbmF0dXJl"`},
		{"platform", ddPlatform().String()},
		{"workspaceRoot", `"/home/u/ws"`},
		{"pathFlavor", `"posix"`},
		{"supports", `["exec","execStream","futureKind"]`},
	}
}

func ddHelloWant() *Hello {
	return &Hello{
		ProtocolVersion: 1,
		DeviceID:        ddDevID,
		Epoch:           ddEpoch,
		SignatureB64:    "c2lnbmF0dXJl",
		Platform:        Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "1.2.3"},
		WorkspaceRoot:   "/home/u/ws",
		PathFlavor:      "posix",
		Supports:        []InstructionKind{KindExec, KindExecStream, "futureKind"},
	}
}

func ddGenAck() ddFields {
	return ddFields{{"t", `"generationAck"`}, {"gen", `"7"`}}
}

func ddHeartbeat() ddFields {
	return ddFields{{"t", `"heartbeat"`}, {"gen", `"7"`}, {"seq", `3`}, {"inflight", `["` + ddInsID + `"]`}}
}

func ddResult(outcome string) ddFields {
	return ddFields{{"t", `"result"`}, {"gen", `"7"`}, {"instructionId", ddQ(ddInsID)}, {"deviceSeq", `0`}, {"outcome", outcome}}
}

func ddStdout() ddFields {
	return ddFields{{"t", `"chunk"`}, {"gen", `"7"`}, {"instructionId", ddQ(ddInsID)}, {"streamSeq", `0`}, {"kind", `"stdout"`}, {"dataB64", `"aGk="`}}
}

func ddExit() ddFields {
	return ddFields{{"t", `"chunk"`}, {"gen", `"7"`}, {"instructionId", ddQ(ddInsID)}, {"streamSeq", `1`}, {"kind", `"exit"`}, {"exitCode", `0`}}
}

func ddGoodbye() ddFields {
	return ddFields{{"t", `"goodbye"`}, {"gen", `"7"`}, {"reason", `"shutdown"`}, {"graceMs", `1000`}}
}

const ddInfo = `{"path":"/w/a.txt","kind":"file","size":12,"mtimeMs":1700000000000,"mode":420}`

func ddInfoFields() ddFields {
	return ddFields{{"path", `"/w/a.txt"`}, {"kind", `"file"`}, {"size", `12`}, {"mtimeMs", `1700000000000`}, {"mode", `420`}}
}

func ddInfoWant() FileInfo {
	return FileInfo{Path: "/w/a.txt", Kind: FileKindFile, Size: 12, MtimeMs: 1700000000000, Mode: ptr(uint32(420))}
}

// ddRejectCase is a frame and the exact stage-1 refusal it must get.
type ddRejectCase struct {
	name   string
	frame  string
	reason FrameRejectReason
	field  string // bad_shape only; ddAnyField when not meaningful
}

// ddExpectReject decodes data and requires a *FrameError with exactly
// reason (and, for bad_shape, field), and no frame.
func ddExpectReject(t *testing.T, kind MessageKind, data []byte, limit int, reason FrameRejectReason, field string) {
	t.Helper()
	f, err := DecodeDeviceFrame(kind, data, limit)
	if err == nil {
		t.Fatalf("accepted %s as %#v; want %s refusal", ddShow(data), f, reason)
	}
	var fe *FrameError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FrameError", err, err)
	}
	if f != nil {
		t.Errorf("refusal %v also returned a frame %#v", err, f)
	}
	if !fe.Reason.Valid() {
		t.Errorf("reason %q is not in DEVICE_FRAME_REJECT_REASONS", fe.Reason)
	}
	if fe.Reason != reason {
		t.Fatalf("%s: reason = %s (field %q, %s), want %s", ddShow(data), fe.Reason, fe.Field, fe.Detail, reason)
	}
	switch {
	case reason != ReasonBadShape:
		if fe.Field != "" {
			t.Errorf("%s refusal names field %q; a frame-level reason has none", reason, fe.Field)
		}
	case field != ddAnyField && fe.Field != field:
		t.Errorf("%s: bad_shape field = %q (%s), want %q", ddShow(data), fe.Field, fe.Detail, field)
	}
}

func ddShow(data []byte) string {
	if len(data) > 300 {
		return fmt.Sprintf("%q… (%d bytes)", data[:300], len(data))
	}
	return fmt.Sprintf("%q", data)
}

func ddRunRejects(t *testing.T, cases []ddRejectCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ddExpectReject(t, TextMessage, []byte(c.frame), DeviceFrameLimit(true), c.reason, c.field)
		})
	}
}

func ddBad(name, frame, field string) ddRejectCase {
	return ddRejectCase{name: name, frame: frame, reason: ReasonBadShape, field: field}
}

// ddDecode decodes a frame that must be accepted after the handshake.
func ddDecode(t *testing.T, frame string) DeviceFrame {
	t.Helper()
	f, err := DecodeDeviceFrame(TextMessage, []byte(frame), DeviceFrameLimit(true))
	if err != nil {
		t.Fatalf("DecodeDeviceFrame(%s) = %v; want it accepted", ddShow([]byte(frame)), err)
	}
	if f == nil {
		t.Fatalf("DecodeDeviceFrame(%s) returned neither a frame nor an error", ddShow([]byte(frame)))
	}
	return f
}

func ddExpectFrame(t *testing.T, frame string, want DeviceFrame) {
	t.Helper()
	got := ddDecode(t, frame)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeDeviceFrame(%s)\n got %#v\nwant %#v", ddShow([]byte(frame)), ddDeref(got), ddDeref(want))
	}
}

// ddDeref makes failure messages show the frame's fields, not its address.
func ddDeref(f DeviceFrame) any {
	if f == nil {
		return nil
	}
	v := reflect.ValueOf(f)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return f
}

// ddPadded returns frame followed by whitespace up to exactly n bytes.
func ddPadded(t *testing.T, frame string, n int) []byte {
	t.Helper()
	if len(frame) > n {
		t.Fatalf("frame is already %d bytes, over %d", len(frame), n)
	}
	return []byte(frame + strings.Repeat(" ", n-len(frame)))
}

// ddHelloOfSize is a valid hello of exactly n bytes, sized by a long
// workspaceRoot rather than by whitespace.
func ddHelloOfSize(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	base := len(ddHello().set("workspaceRoot", `"/"`).String())
	if n < base {
		t.Fatalf("a hello is at least %d bytes", base)
	}
	root := "/" + strings.Repeat("w", n-base)
	b := []byte(ddHello().set("workspaceRoot", ddQ(root)).String())
	if len(b) != n {
		t.Fatalf("built a %d-byte hello, want %d", len(b), n)
	}
	return b, root
}

// --- frame_too_large --------------------------------------------------------

func TestDeviceFrameLimitIsPreAuthCapThenMaxFrameBytes(t *testing.T) {
	if got := DeviceFrameLimit(false); got != 4096 {
		t.Errorf("DeviceFrameLimit(false) = %d, want maxPreAuthFrameBytes 4096", got)
	}
	if got := DeviceFrameLimit(true); got != 1048576 {
		t.Errorf("DeviceFrameLimit(true) = %d, want maxFrameBytes 1048576", got)
	}
}

// §2.1/§2.4: before the handshake every frame is capped at 4096 bytes, measured
// on the reassembled frame; a hello must fit in it.
func TestDeviceFrameRejectFrameTooLargePreAuthCap(t *testing.T) {
	pre, post := DeviceFrameLimit(false), DeviceFrameLimit(true)

	t.Run("4097 bytes of whitespace-padded hello", func(t *testing.T) {
		data := ddPadded(t, ddHello().String(), 4097)
		ddExpectReject(t, TextMessage, data, pre, ReasonFrameTooLarge, "")
		f, err := DecodeDeviceFrame(TextMessage, data, post)
		if err != nil {
			t.Fatalf("the same 4097 bytes after the handshake: %v", err)
		}
		if !reflect.DeepEqual(f, ddHelloWant()) {
			t.Errorf("decoded %#v, want %#v", ddDeref(f), ddDeref(ddHelloWant()))
		}
	})
	t.Run("4097 bytes of hello with a long workspaceRoot", func(t *testing.T) {
		data, root := ddHelloOfSize(t, 4097)
		ddExpectReject(t, TextMessage, data, pre, ReasonFrameTooLarge, "")
		f, err := DecodeDeviceFrame(TextMessage, data, post)
		if err != nil {
			t.Fatalf("the same 4097 bytes after the handshake: %v", err)
		}
		if h, ok := f.(*Hello); !ok || h.WorkspaceRoot != root {
			t.Errorf("decoded %#v, want a hello with the %d-byte workspaceRoot", ddDeref(f), len(root))
		}
	})
	t.Run("exactly 4096 bytes, whitespace-padded, is accepted", func(t *testing.T) {
		data := ddPadded(t, ddHello().String(), 4096)
		f, err := DecodeDeviceFrame(TextMessage, data, pre)
		if err != nil {
			t.Fatalf("4096-byte hello refused pre-auth: %v", err)
		}
		if !reflect.DeepEqual(f, ddHelloWant()) {
			t.Errorf("decoded %#v, want %#v", ddDeref(f), ddDeref(ddHelloWant()))
		}
	})
	t.Run("exactly 4096 bytes, by a long string, is accepted", func(t *testing.T) {
		data, root := ddHelloOfSize(t, 4096)
		f, err := DecodeDeviceFrame(TextMessage, data, pre)
		if err != nil {
			t.Fatalf("4096-byte hello refused pre-auth: %v", err)
		}
		want := ddHelloWant()
		want.WorkspaceRoot = root
		if !reflect.DeepEqual(f, want) {
			t.Errorf("decoded %#v, want %#v", ddDeref(f), ddDeref(want))
		}
	})
	t.Run("4097 bytes of garbage is too large, not not_json", func(t *testing.T) {
		ddExpectReject(t, TextMessage, bytes.Repeat([]byte{'x'}, 4097), pre, ReasonFrameTooLarge, "")
	})
	t.Run("4097 bytes of a JSON array is too large, not not_object", func(t *testing.T) {
		ddExpectReject(t, TextMessage, ddPadded(t, `[1,2,3]`, 4097), pre, ReasonFrameTooLarge, "")
	})
	t.Run("a 4097-byte binary frame is too large", func(t *testing.T) {
		ddExpectReject(t, BinaryMessage, ddPadded(t, ddHello().String(), 4097), pre, ReasonFrameTooLarge, "")
	})
	t.Run("the cap is the limit argument, counted in bytes", func(t *testing.T) {
		frame := ddGenAck().String()
		ddExpectReject(t, TextMessage, []byte(frame), len(frame)-1, ReasonFrameTooLarge, "")
		if _, err := DecodeDeviceFrame(TextMessage, []byte(frame), len(frame)); err != nil {
			t.Errorf("a frame of exactly the limit refused: %v", err)
		}
		// Multi-byte UTF-8 counts by bytes, not characters.
		uni := ddHello().set("workspaceRoot", `"/é"`).String()
		ddExpectReject(t, TextMessage, []byte(uni), len(uni)-1, ReasonFrameTooLarge, "")
	})
}

// §2.1/§2.4: after the handshake the cap is maxFrameBytes (1 MiB).
func TestDeviceFrameRejectFrameTooLargeAfterHandshake(t *testing.T) {
	post := DeviceFrameLimit(true)
	head := ddStdout().without("dataB64").String()
	head = head[:len(head)-1] + `,"dataB64":"`
	const tail = `"}`
	quads := (MaxFrameBytes - len(head) - len(tail)) / 4
	frame := head + strings.Repeat("AAAA", quads) + tail

	data := ddPadded(t, frame, MaxFrameBytes)
	f, err := DecodeDeviceFrame(TextMessage, data, post)
	if err != nil {
		t.Fatalf("a frame of exactly maxFrameBytes refused: %v", err)
	}
	if c, ok := f.(*Chunk); !ok || len(c.Data) != 3*quads || !bytes.Equal(c.Data, make([]byte, 3*quads)) {
		t.Errorf("decoded %T, want a chunk with %d zero bytes", f, 3*quads)
	}

	ddExpectReject(t, TextMessage, ddPadded(t, frame, MaxFrameBytes+1), post, ReasonFrameTooLarge, "")
	ddExpectReject(t, TextMessage, bytes.Repeat([]byte{' '}, MaxFrameBytes+1), post, ReasonFrameTooLarge, "")
}

// --- not_json -----------------------------------------------------------------

// §2: binary WebSocket frames are refused, and §2.4 classifies them not_json
// even when their bytes would be a valid frame.
func TestBinaryFramesAreNotJSON(t *testing.T) {
	for _, frame := range []string{
		ddHello().String(),
		ddGenAck().String(),
		ddHeartbeat().String(),
		ddResult(`{"ok":true,"kind":"void"}`).String(),
		ddStdout().String(),
		ddGoodbye().String(),
		`[]`,
		`not json`,
		``,
	} {
		t.Run(frame, func(t *testing.T) {
			ddExpectReject(t, BinaryMessage, []byte(frame), DeviceFrameLimit(false), ReasonNotJSON, "")
			ddExpectReject(t, BinaryMessage, []byte(frame), DeviceFrameLimit(true), ReasonNotJSON, "")
		})
	}
}

// §2.4 not_json: "not valid JSON".
func TestFrameMustBeValidJSON(t *testing.T) {
	ack := ddGenAck().String()
	hello := ddHello().String()
	cases := []ddRejectCase{
		{name: "empty input", frame: ``},
		{name: "only whitespace", frame: " \n\t "},
		{name: "lone brace", frame: `{`},
		{name: "truncated after a member", frame: ack[:len(ack)-1]},
		{name: "truncated inside a string", frame: `{"t":"generationAck","gen":"7`},
		{name: "truncated inside a name", frame: `{"t":"generationAck","ge`},
		{name: "truncated hello", frame: hello[:len(hello)/2]},
		{name: "truncated nested object", frame: `{"t":"result","gen":"7","instructionId":"i","deviceSeq":0,"outcome":{"ok":true`},
		{name: "trailing garbage", frame: ack + `x`},
		{name: "a second object", frame: ack + ack},
		{name: "a second object after whitespace", frame: ack + "\n" + ack},
		{name: "a trailing number", frame: ack + ` 1`},
		{name: "a trailing comma", frame: ack + `,`},
		{name: "a stray closing brace", frame: ack + `}`},
		{name: "trailing comma in object", frame: `{"t":"generationAck","gen":"7",}`},
		{name: "trailing comma in array", frame: `{"t":"heartbeat","gen":"7","seq":0,"inflight":["a",]}`},
		{name: "single quotes", frame: `{'t':'generationAck','gen':'7'}`},
		{name: "unquoted names", frame: `{t:"generationAck",gen:"7"}`},
		{name: "a comment", frame: `{"t":"generationAck",/* c */"gen":"7"}`},
		{name: "missing colon", frame: `{"t" "generationAck"}`},
		{name: "NaN", frame: `{"t":"heartbeat","gen":"7","seq":NaN,"inflight":[]}`},
		{name: "leading zero number", frame: `{"t":"heartbeat","gen":"7","seq":01,"inflight":[]}`},
		{name: "leading plus number", frame: `{"t":"heartbeat","gen":"7","seq":+1,"inflight":[]}`},
		{name: "bare fraction", frame: `{"t":"heartbeat","gen":"7","seq":.5,"inflight":[]}`},
		{name: "raw control character in a string", frame: "{\"t\":\"generationAck\",\"gen\":\"7\",\"x\":\"a\nb\"}"},
		{name: "invalid escape", frame: `{"t":"generationAck","gen":"7","x":"\q"}`},
		{name: "invalid UTF-8 inside a string value", frame: ddHello().set("deviceId", "\"dev_\xff\"").String()},
		{name: "invalid UTF-8 inside an ignored member", frame: ddGenAck().set("x", "\"\xc3\x28\"").String()},
		{name: "invalid UTF-8 in a member name", frame: "{\"t\":\"generationAck\",\"gen\":\"7\",\"\xff\":1}"},
		{name: "truncated UTF-8 sequence", frame: "{\"t\":\"generationAck\",\"gen\":\"7\",\"x\":\"\xe2\x82\"}"},
		{name: "invalid UTF-8 in dataB64", frame: ddStdout().set("dataB64", "\"aGk\xff\"").String()},
		{name: "invalid JSON that is not an object", frame: `[1,`},
		{name: "array with trailing data", frame: `[] x`},
		{name: "two scalars", frame: `1 2`},
		{name: "misspelled literal", frame: `nul`},
		{name: "unterminated string", frame: `"hello`},
		{name: "invalid UTF-8 in a top-level string", frame: "\"\xff\""},
	}
	for i := range cases {
		cases[i].reason = ReasonNotJSON
	}
	ddRunRejects(t, cases)
}

// --- not_object ---------------------------------------------------------------

// §2.4 not_object: "valid JSON but not a top-level object".
func TestFrameMustBeAJSONObject(t *testing.T) {
	var cases []ddRejectCase
	for _, frame := range []string{
		`[]`,
		`[{"t":"generationAck","gen":"7"}]`,
		`["t","generationAck"]`,
		`"generationAck"`,
		`""`,
		`42`,
		`-1.5`,
		`1e3`,
		`0`,
		`null`,
		`true`,
		`false`,
		" \n[] \t",
		` "x" `,
	} {
		cases = append(cases, ddRejectCase{name: frame, frame: frame, reason: ReasonNotObject})
	}
	ddRunRejects(t, cases)
}

// --- unknown_type ----------------------------------------------------------------

// §2.4 unknown_type: "no string t, or a t outside the device→server set".
func TestFrameMustCarryAStringTFromTheDeviceSet(t *testing.T) {
	gen := `"gen":"7"`
	cases := []ddRejectCase{
		{name: "empty object", frame: `{}`},
		{name: "no t", frame: `{` + gen + `}`},
		{name: "upper-case T", frame: `{"T":"generationAck",` + gen + `}`},
		{name: "type instead of t", frame: `{"type":"generationAck",` + gen + `}`},
		{name: "t a number", frame: `{"t":1,` + gen + `}`},
		{name: "t null", frame: `{"t":null,` + gen + `}`},
		{name: "t true", frame: `{"t":true,` + gen + `}`},
		{name: "t an array", frame: `{"t":["generationAck"],` + gen + `}`},
		{name: "t an object", frame: `{"t":{"t":"generationAck"},` + gen + `}`},
		{name: "t empty", frame: `{"t":"",` + gen + `}`},
		{name: "t Hello", frame: ddHello().set("t", `"Hello"`).String()},
		{name: "t HELLO", frame: ddHello().set("t", `"HELLO"`).String()},
		{name: "t GenerationAck", frame: `{"t":"GenerationAck",` + gen + `}`},
		{name: "t generationack", frame: `{"t":"generationack",` + gen + `}`},
		{name: "t with a leading space", frame: ddHello().set("t", `" hello"`).String()},
		{name: "t with a trailing space", frame: ddHello().set("t", `"hello "`).String()},
		{name: "t with a trailing NUL", frame: ddHello().set("t", `"hello\u0000"`).String()},
		{name: "t unknown", frame: `{"t":"resume",` + gen + `}`},
		// t outside the set wins over a malformed body (§2.4 order).
		{name: "unknown t with a malformed body", frame: `{"t":"resume","gen":7,"seq":1.5}`},
		{name: "no t with a malformed body", frame: `{"gen":7}`},
	}
	for _, st := range ServerFrameTypes() {
		cases = append(cases, ddRejectCase{name: "server frame type " + string(st), frame: `{"t":"` + string(st) + `",` + gen + `,"instructionId":"` + ddInsID + `"}`})
	}
	cases = append(cases, ddRejectCase{name: "an instruction frame", frame: `{"t":"instruction","gen":"7","instructionId":"` + ddInsID + `","rootSessionId":"ses_1","issuedSeq":0,"kind":"exec","args":{"command":"echo hi"},"timeoutMs":30000}`})
	for i := range cases {
		cases[i].reason = ReasonUnknownType
	}
	ddRunRejects(t, cases)
}

// --- bad_shape: presence and types ----------------------------------------------

// §2.2: every field without a ? is required, in each of the six frame types.
func TestEveryRequiredFieldIsRequired(t *testing.T) {
	var cases []ddRejectCase
	missing := func(typ string, base ddFields, names ...string) {
		for _, n := range names {
			cases = append(cases, ddBad(typ+" without "+n, base.without(n).String(), n))
		}
	}
	missing("hello", ddHello(), "protocolVersion", "deviceId", "epoch", "signatureB64", "platform", "workspaceRoot", "pathFlavor", "supports")
	for _, n := range []string{"os", "arch", "executorVersion"} {
		cases = append(cases, ddBad("hello without platform."+n, ddHello().set("platform", ddPlatform().without(n).String()).String(), "platform."+n))
	}
	cases = append(cases,
		ddBad("hello with an empty platform", ddHello().set("platform", `{}`).String(), "platform.os"),
		ddBad("hello resuming without unackedResults", ddHello().set("resuming", `{}`).String(), "resuming.unackedResults"),
	)
	missing("generationAck", ddGenAck(), "gen")
	missing("heartbeat", ddHeartbeat(), "gen", "seq", "inflight")
	missing("result", ddResult(`{"ok":true,"kind":"void"}`), "gen", "instructionId", "deviceSeq", "outcome")
	missing("stdout chunk", ddStdout(), "gen", "instructionId", "streamSeq", "kind", "dataB64")
	missing("exit chunk", ddExit(), "gen", "instructionId", "streamSeq", "kind", "exitCode")
	missing("goodbye", ddGoodbye(), "gen", "reason")
	cases = append(cases,
		ddBad("generationAck with only t", `{"t":"generationAck"}`, "gen"),
		ddBad("hello with only t", `{"t":"hello"}`, ddAnyField),
		ddBad("result with only t", `{"t":"result"}`, ddAnyField),
		ddBad("chunk with only t", `{"t":"chunk"}`, ddAnyField),
	)
	ddRunRejects(t, cases)

	// The optional fields really are optional.
	t.Run("optional fields may be absent", func(t *testing.T) {
		ddDecode(t, ddHello().without("resuming").String())
		ddDecode(t, ddGoodbye().without("graceMs").String())
	})
}

// §2.2: each field has one JSON type; any other type is bad_shape.
func TestFieldsMustHaveTheirSpecTypes(t *testing.T) {
	h, hb, ex, gb := ddHello(), ddHeartbeat(), ddExit(), ddGoodbye()
	so := ddStdout()
	void := `{"ok":true,"kind":"void"}`
	r := ddResult(void)
	cases := []ddRejectCase{
		ddBad("hello protocolVersion a string", h.set("protocolVersion", `"1"`).String(), "protocolVersion"),
		ddBad("hello protocolVersion true", h.set("protocolVersion", `true`).String(), "protocolVersion"),
		ddBad("hello protocolVersion null", h.set("protocolVersion", `null`).String(), "protocolVersion"),
		ddBad("hello deviceId a number", h.set("deviceId", `5`).String(), "deviceId"),
		ddBad("hello deviceId null", h.set("deviceId", `null`).String(), "deviceId"),
		ddBad("hello deviceId an array", h.set("deviceId", `["`+ddDevID+`"]`).String(), "deviceId"),
		ddBad("hello epoch a number", h.set("epoch", `5`).String(), "epoch"),
		ddBad("hello epoch null", h.set("epoch", `null`).String(), "epoch"),
		ddBad("hello signatureB64 an array", h.set("signatureB64", `[]`).String(), "signatureB64"),
		ddBad("hello signatureB64 false", h.set("signatureB64", `false`).String(), "signatureB64"),
		ddBad("hello platform a string", h.set("platform", `"linux"`).String(), "platform"),
		ddBad("hello platform an array", h.set("platform", `[]`).String(), "platform"),
		ddBad("hello platform null", h.set("platform", `null`).String(), "platform"),
		ddBad("hello platform.os a number", h.set("platform", ddPlatform().set("os", `1`).String()).String(), "platform.os"),
		ddBad("hello platform.arch null", h.set("platform", ddPlatform().set("arch", `null`).String()).String(), "platform.arch"),
		ddBad("hello platform.executorVersion an object", h.set("platform", ddPlatform().set("executorVersion", `{}`).String()).String(), "platform.executorVersion"),
		ddBad("hello workspaceRoot an object", h.set("workspaceRoot", `{}`).String(), "workspaceRoot"),
		ddBad("hello pathFlavor false", h.set("pathFlavor", `false`).String(), "pathFlavor"),
		ddBad("hello supports a string", h.set("supports", `"exec"`).String(), "supports"),
		ddBad("hello supports null", h.set("supports", `null`).String(), "supports"),
		ddBad("hello supports an object", h.set("supports", `{"exec":true}`).String(), "supports"),
		ddBad("hello supports with a number", h.set("supports", `["exec",1]`).String(), "supports[1]"),
		ddBad("hello supports with null", h.set("supports", `[null]`).String(), "supports[0]"),
		ddBad("hello supports with a nested array", h.set("supports", `[["exec"]]`).String(), "supports[0]"),
		ddBad("hello resuming a number", h.set("resuming", `1`).String(), "resuming"),
		ddBad("hello resuming null", h.set("resuming", `null`).String(), "resuming"),
		ddBad("hello resuming an array", h.set("resuming", `[]`).String(), "resuming"),
		ddBad("hello resuming.unackedResults a string", h.set("resuming", `{"unackedResults":"1"}`).String(), "resuming.unackedResults"),

		ddBad("generationAck gen null", ddGenAck().set("gen", `null`).String(), "gen"),
		ddBad("generationAck gen an array", ddGenAck().set("gen", `["7"]`).String(), "gen"),
		ddBad("generationAck gen an object", ddGenAck().set("gen", `{}`).String(), "gen"),

		ddBad("heartbeat seq a string", hb.set("seq", `"3"`).String(), "seq"),
		ddBad("heartbeat seq null", hb.set("seq", `null`).String(), "seq"),
		ddBad("heartbeat inflight a string", hb.set("inflight", `"`+ddInsID+`"`).String(), "inflight"),
		ddBad("heartbeat inflight null", hb.set("inflight", `null`).String(), "inflight"),
		ddBad("heartbeat inflight with a number", hb.set("inflight", `[1]`).String(), "inflight[0]"),
		ddBad("heartbeat inflight with an object", hb.set("inflight", `["a",{}]`).String(), "inflight[1]"),

		ddBad("result instructionId a number", r.set("instructionId", `5`).String(), "instructionId"),
		ddBad("result instructionId null", r.set("instructionId", `null`).String(), "instructionId"),
		ddBad("result deviceSeq a string", r.set("deviceSeq", `"0"`).String(), "deviceSeq"),
		ddBad("result deviceSeq true", r.set("deviceSeq", `true`).String(), "deviceSeq"),
		ddBad("result outcome a string", r.set("outcome", `"ok"`).String(), "outcome"),
		ddBad("result outcome an array", r.set("outcome", `[`+void+`]`).String(), "outcome"),
		ddBad("result outcome null", r.set("outcome", `null`).String(), "outcome"),
		ddBad("result outcome true", r.set("outcome", `true`).String(), "outcome"),

		ddBad("chunk instructionId a number", so.set("instructionId", `5`).String(), "instructionId"),
		ddBad("chunk streamSeq a string", so.set("streamSeq", `"0"`).String(), "streamSeq"),
		ddBad("chunk kind a number", so.set("kind", `1`).String(), "kind"),
		ddBad("chunk kind null", so.set("kind", `null`).String(), "kind"),
		ddBad("chunk dataB64 a number", so.set("dataB64", `5`).String(), "dataB64"),
		ddBad("chunk dataB64 null", so.set("dataB64", `null`).String(), "dataB64"),
		ddBad("chunk dataB64 an array of bytes", so.set("dataB64", `[104,105]`).String(), "dataB64"),
		ddBad("exit chunk exitCode a string", ex.set("exitCode", `"0"`).String(), "exitCode"),
		ddBad("exit chunk exitCode null", ex.set("exitCode", `null`).String(), "exitCode"),
		ddBad("exit chunk exitCode true", ex.set("exitCode", `true`).String(), "exitCode"),

		ddBad("goodbye reason a number", gb.set("reason", `1`).String(), "reason"),
		ddBad("goodbye reason null", gb.set("reason", `null`).String(), "reason"),
		ddBad("goodbye graceMs a string", gb.set("graceMs", `"1000"`).String(), "graceMs"),
		ddBad("goodbye graceMs null", gb.set("graceMs", `null`).String(), "graceMs"),
		ddBad("goodbye graceMs false", gb.set("graceMs", `false`).String(), "graceMs"),
	}
	ddRunRejects(t, cases)
}

// --- bad_shape: numbers -----------------------------------------------------------

// ddNumField is one numeric field of one frame: how to put a raw JSON number
// into it, the field path a refusal names, and how to read it back.
type ddNumField struct {
	name   string
	field  string
	frame  func(raw string) string
	get    func(DeviceFrame) int64
	signed bool     // negative values are in range
	good   []string // accepted spellings, beyond 0 and 2^53-1
	noMax  bool     // 2^53-1 is out of this field's own range
	goInt  bool     // held in a Go int: on a 32-bit platform, values beyond it are refused
}

func ddOutcomeOf(f DeviceFrame) Outcome { return f.(*Result).Outcome }

func ddNumFields() []ddNumField {
	statInfo := func(k string) func(string) string {
		return func(raw string) string {
			return ddResult(`{"ok":true,"kind":"stat","info":` + ddInfoFields().set(k, raw).String() + `}`).String()
		}
	}
	return []ddNumField{
		{
			name: "hello.protocolVersion", field: "protocolVersion", goInt: true,
			frame: func(raw string) string { return ddHello().set("protocolVersion", raw).String() },
			get:   func(f DeviceFrame) int64 { return int64(f.(*Hello).ProtocolVersion) },
			good:  []string{"1"},
		},
		{
			name: "hello.resuming.unackedResults", field: "resuming.unackedResults",
			frame: func(raw string) string { return ddHello().set("resuming", `{"unackedResults":`+raw+`}`).String() },
			get:   func(f DeviceFrame) int64 { return f.(*Hello).Resuming.UnackedResults },
			good:  []string{"2"},
		},
		{
			name: "heartbeat.seq", field: "seq",
			frame: func(raw string) string { return ddHeartbeat().set("seq", raw).String() },
			get:   func(f DeviceFrame) int64 { return f.(*Heartbeat).Seq },
			good:  []string{"1"},
		},
		{
			name: "result.deviceSeq", field: "deviceSeq",
			frame: func(raw string) string { return ddResult(`{"ok":true,"kind":"void"}`).set("deviceSeq", raw).String() },
			get:   func(f DeviceFrame) int64 { return f.(*Result).DeviceSeq },
		},
		{
			name: "chunk.streamSeq", field: "streamSeq",
			frame: func(raw string) string { return ddStdout().set("streamSeq", raw).String() },
			get:   func(f DeviceFrame) int64 { return f.(*Chunk).StreamSeq },
			good:  []string{"41"},
		},
		{
			name: "chunk.exitCode", field: "exitCode", signed: true, goInt: true,
			frame: func(raw string) string { return ddExit().set("exitCode", raw).String() },
			get:   func(f DeviceFrame) int64 { return int64(f.(*Chunk).ExitCode) },
			good:  []string{"1", "-1", "255", "-9007199254740991"},
		},
		{
			name: "goodbye.graceMs", field: "graceMs",
			frame: func(raw string) string { return ddGoodbye().set("graceMs", raw).String() },
			get:   func(f DeviceFrame) int64 { return *f.(*Goodbye).GraceMs },
			good:  []string{"120000"},
		},
		{
			name: "outcome.exitCode", field: "outcome.exitCode", signed: true, goInt: true,
			frame: func(raw string) string {
				return ddResult(`{"ok":true,"kind":"exec","exitCode":` + raw + `}`).String()
			},
			get:  func(f DeviceFrame) int64 { return int64(ddOutcomeOf(f).(ExecOutcome).ExitCode) },
			good: []string{"1", "-1", "137", "-9007199254740991"},
		},
		{
			name: "outcome.info.size", field: "outcome.info.size",
			frame: statInfo("size"),
			get:   func(f DeviceFrame) int64 { return ddOutcomeOf(f).(StatOutcome).Info.Size },
			good:  []string{"12"},
		},
		{
			name: "outcome.info.mtimeMs", field: "outcome.info.mtimeMs", signed: true,
			frame: statInfo("mtimeMs"),
			get:   func(f DeviceFrame) int64 { return ddOutcomeOf(f).(StatOutcome).Info.MtimeMs },
			good:  []string{"1700000000000", "-1", "-9007199254740991"},
		},
		{
			name: "outcome.info.mode", field: "outcome.info.mode", noMax: true,
			frame: statInfo("mode"),
			get:   func(f DeviceFrame) int64 { return int64(*ddOutcomeOf(f).(StatOutcome).Info.Mode) },
			good:  []string{"420", "511", "4294967295"},
		},
		{
			name: "outcome.entries[1].size", field: "outcome.entries[1].size",
			frame: func(raw string) string {
				return ddResult(`{"ok":true,"kind":"stat","entries":[` + ddInfo + `,` + ddInfoFields().set("size", raw).String() + `]}`).String()
			},
			get:  func(f DeviceFrame) int64 { return ddOutcomeOf(f).(StatOutcome).Entries[1].Size },
			good: []string{"3"},
		},
	}
}

// §2.2: "All numeric fields must be safe integers (no floats, no strings)":
// magnitude at most 2^53-1, and spelled as an integer, without a fraction or
// an exponent.
func TestNumericFieldsMustBeSafeIntegers(t *testing.T) {
	bad := []string{
		twoTo53,
		negTwoTo53,
		"9007199254740993",
		"-9007199254740993",
		"9223372036854775807",  // int64 max
		"9223372036854775808",  // int64 max + 1
		"-9223372036854775809", // below int64 min
		"18446744073709551616", // 2^64
		"100000000000000000000000000000000000000",
		"1.5",
		"-1.5",
		"0.5",
		"1e3",
		"1E3",
		"1e+3",
		"1e-3",
		"1.0",
		"0.0",
		"-0.0",
		"0e0",
		"1e400",
		"9007199254740991.0",
	}
	for _, nf := range ddNumFields() {
		t.Run(nf.name, func(t *testing.T) {
			for _, raw := range bad {
				t.Run(raw, func(t *testing.T) {
					ddExpectReject(t, TextMessage, []byte(nf.frame(raw)), DeviceFrameLimit(true), ReasonBadShape, nf.field)
				})
			}
			good := append([]string{"0"}, nf.good...)
			if !nf.noMax {
				good = append(good, maxSafe)
			}
			for _, raw := range good {
				t.Run("accepts "+raw, func(t *testing.T) {
					var want int64
					if _, err := fmt.Sscan(raw, &want); err != nil {
						t.Fatal(err)
					}
					if nf.goInt && (want < math.MinInt || want > math.MaxInt) {
						ddExpectReject(t, TextMessage, []byte(nf.frame(raw)), DeviceFrameLimit(true), ReasonBadShape, nf.field)
						return // 32-bit: refused, never truncated
					}
					f := ddDecode(t, nf.frame(raw))
					if got := nf.get(f); got != want {
						t.Errorf("decoded %s as %d, want %d", raw, got, want)
					}
				})
			}
		})
	}
}

// §2.2: seq, streamSeq, deviceSeq, graceMs and unackedResults are int ≥ 0.
func TestCountersAndDurationsMustBeNonNegative(t *testing.T) {
	var cases []ddRejectCase
	for _, nf := range ddNumFields() {
		switch nf.name {
		case "heartbeat.seq", "result.deviceSeq", "chunk.streamSeq", "goodbye.graceMs", "hello.resuming.unackedResults":
		default:
			continue
		}
		for _, raw := range []string{"-1", "-9007199254740991"} {
			cases = append(cases, ddBad(nf.name+" "+raw, nf.frame(raw), nf.field))
		}
	}
	ddRunRejects(t, cases)
}

// --- bad_shape: gen ---------------------------------------------------------------

// §1.5/§2.2: gen is the canonical decimal string of a 64-bit value: leading
// zeros, a plus sign, whitespace or a float form are malformed, and so is a
// number.
func TestGenMustBeCanonicalDecimalString(t *testing.T) {
	void := `{"ok":true,"kind":"void"}`
	frames := map[string]func(raw string) string{
		"generationAck": func(raw string) string { return ddGenAck().set("gen", raw).String() },
		"heartbeat":     func(raw string) string { return ddHeartbeat().set("gen", raw).String() },
		"result":        func(raw string) string { return ddResult(void).set("gen", raw).String() },
		"chunk":         func(raw string) string { return ddStdout().set("gen", raw).String() },
		"exit chunk":    func(raw string) string { return ddExit().set("gen", raw).String() },
		"goodbye":       func(raw string) string { return ddGoodbye().set("gen", raw).String() },
	}
	bad := []string{
		`"07"`, `"00"`, `"007"`, `"+7"`, `"-7"`, `"-1"`, `"-0"`,
		`" 7"`, `"7 "`, `"\t7"`, `"7\n"`, `"\u00a07"`,
		`"7.0"`, `"7."`, `".7"`, `"7e0"`, `"7E0"`,
		`""`, `"0x7"`, `"0o7"`, `"0b1"`, `"7a"`, `"seven"`, `"7_000"`, `"7,000"`,
		`"\uff17"`,               // FULLWIDTH DIGIT SEVEN
		`"18446744073709551616"`, // 2^64
		`"18446744073709551625"`,
		`"99999999999999999999"`,
		`"184467440737095516150"`,
		`7`, `0`, `7.0`, `1e3`, `null`, `true`, `["7"]`, `{"gen":"7"}`,
	}
	good := map[string]Gen{
		`"0"`:                    0,
		`"7"`:                    7,
		`"10"`:                   10,
		`"9007199254740993"`:     9007199254740993, // beyond 2^53: gen is 64-bit, not a JSON number
		`"18446744073709551615"`: 18446744073709551615,
		`"\u0037"`:               7, // a JSON escape: the string value is canonical
	}
	genOf := func(f DeviceFrame) Gen {
		switch f := f.(type) {
		case *GenerationAck:
			return f.Gen
		case *Heartbeat:
			return f.Gen
		case *Result:
			return f.Gen
		case *Chunk:
			return f.Gen
		case *Goodbye:
			return f.Gen
		}
		t.Fatalf("%T carries no gen", f)
		return 0
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			for _, raw := range bad {
				t.Run(raw, func(t *testing.T) {
					ddExpectReject(t, TextMessage, []byte(frame(raw)), DeviceFrameLimit(true), ReasonBadShape, "gen")
				})
			}
			for raw, want := range good {
				t.Run("accepts "+raw, func(t *testing.T) {
					f := ddDecode(t, frame(raw))
					if got := genOf(f); got != want {
						t.Errorf("gen %s decoded as %d, want %d", raw, got, want)
					}
					if s := genOf(f).String(); raw != `"\u0037"` && `"`+s+`"` != raw {
						t.Errorf("gen %s re-formats as %q; the echoed string must be the one received", raw, s)
					}
				})
			}
		})
	}
}

// --- bad_shape: dataB64 -----------------------------------------------------------

// §4 Encoding: dataB64 must be canonical base64: the standard alphabet,
// correct = padding, no line breaks, no URL-safe alphabet, and the exact
// padding form that re-encodes to the same string.
func TestDataB64MustBeCanonical(t *testing.T) {
	bad := map[string]string{
		"URL-safe minus":               `"-_8="`,
		"URL-safe minus only":          `"-/8="`,
		"URL-safe underscore only":     `"+_8="`,
		"URL-safe in a longer string":  `"aGVsbG8-"`,
		"missing padding":              `"aGk"`,
		"missing both pad characters":  `"aA"`,
		"missing one of two pads":      `"aA="`,
		"a single character":           `"a"`,
		"extra padding":                `"aGk=="`,
		"triple padding":               `"aGk==="`,
		"padding alone":                `"="`,
		"double padding alone":         `"=="`,
		"a block of padding":           `"===="`,
		"non-zero padding bits, 2 out": `"aGl="`,
		"non-zero padding bits, m":     `"aGm="`,
		"non-zero padding bits, 1 out": `"aB=="`,
		"non-zero padding bits, last":  `"aP=="`,
		"data after padding":           `"aGk=aGk="`,
		"padded block then more":       `"aA==aA=="`,
		"escaped line feed inside":     `"aG\nk="`,
		"escaped line feed at the end": `"aGk=\n"`,
		"escaped line feed in front":   `"\naGk="`,
		"escaped carriage return":      `"aG\rk="`,
		"escaped CRLF":                 `"aGVs\r\nbG8="`,
		"line feed as \\u000a":         `"aG\u000ak="`,
		"carriage return as \\u000d":   `"aG\u000dk="`,
		"line break after 76 chars":    `"` + strings.Repeat("AAAA", 19) + `\n` + `AAAA"`,
		"a space inside":               `"aG k="`,
		"a leading space":              `" aGk="`,
		"a trailing space":             `"aGk= "`,
		"a tab":                        `"aG\tk="`,
		"a NUL":                        `"aGk=\u0000"`,
		"a non-ASCII letter":           `"aGk\u00e9"`,
		"a dot":                        `"aG.k"`,
		"only whitespace":              `" "`,
	}
	for name, raw := range bad {
		t.Run(name, func(t *testing.T) {
			for _, kind := range []string{"stdout", "stderr", "data"} {
				frame := ddStdout().set("kind", ddQ(kind)).set("dataB64", raw).String()
				ddExpectReject(t, TextMessage, []byte(frame), DeviceFrameLimit(true), ReasonBadShape, "dataB64")
			}
		})
	}

	good := []struct {
		name string
		raw  string
		want []byte
	}{
		{"empty", `""`, []byte{}},
		{"one byte", `"aA=="`, []byte("h")},
		{"two bytes", `"aGk="`, []byte("hi")},
		{"three bytes", `"aGk/"`, []byte{'h', 'i', '?'}},
		{"five bytes", `"aGVsbG8="`, []byte("hello")},
		{"plus and slash", `"+/8="`, []byte{0xfb, 0xff}},
		{"zero bytes", `"AAAA"`, []byte{0, 0, 0}},
		// The rule is on the string value: a JSON escape that spells a
		// canonical value is canonical.
		{"escaped letter", `"\u0061Gk="`, []byte("hi")},
		{"escaped padding", `"aGk\u003d"`, []byte("hi")},
		{"escaped slash", `"aGk\/"`, []byte{'h', 'i', '?'}},
	}
	for _, g := range good {
		t.Run("accepts "+g.name, func(t *testing.T) {
			for _, kind := range []ChunkKind{ChunkStdout, ChunkStderr, ChunkData} {
				frame := ddStdout().set("kind", ddQ(string(kind))).set("dataB64", g.raw).String()
				ddExpectFrame(t, frame, &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 0, Kind: kind, Data: g.want})
			}
		})
	}
}

// --- bad_shape: chunk kind ----------------------------------------------------------

// §4: stdout, stderr and data must carry dataB64 and must not carry exitCode;
// exit must carry exitCode and must not carry dataB64. A kind outside
// DEVICE_CHUNK_KINDS is bad_shape.
func TestChunkKindAndFieldsMustAgree(t *testing.T) {
	ex := ddExit()
	cases := []ddRejectCase{
		ddBad("exit with dataB64", ex.set("dataB64", `"aGk="`).String(), "dataB64"),
		ddBad("exit with an empty dataB64", ex.set("dataB64", `""`).String(), "dataB64"),
		ddBad("exit without exitCode", ex.without("exitCode").String(), "exitCode"),
		ddBad("exit with dataB64 instead of exitCode", ex.without("exitCode").set("dataB64", `"aGk="`).String(), ddAnyField),
		ddBad("exit with a fractional exitCode", ex.set("exitCode", `0.5`).String(), "exitCode"),
	}
	for _, k := range []string{"stdout", "stderr", "data"} {
		c := ddStdout().set("kind", ddQ(k))
		cases = append(cases,
			ddBad(k+" without dataB64", c.without("dataB64").String(), "dataB64"),
			ddBad(k+" with exitCode", c.set("exitCode", `0`).String(), "exitCode"),
			ddBad(k+" with exitCode instead of dataB64", c.without("dataB64").set("exitCode", `0`).String(), ddAnyField),
		)
	}
	for _, k := range []string{"", "Stdout", "STDOUT", "stdin", "exitCode", "Exit", "error", "output", "stdout "} {
		cases = append(cases, ddBad("kind "+ddQ(k), ddStdout().set("kind", ddQ(k)).String(), "kind"))
	}
	ddRunRejects(t, cases)

	t.Run("every kind in DEVICE_CHUNK_KINDS with its own field is accepted", func(t *testing.T) {
		for _, k := range ChunkKinds() {
			if k == ChunkExit {
				ddExpectFrame(t, ex.String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 1, Kind: ChunkExit})
				continue
			}
			ddExpectFrame(t, ddStdout().set("kind", ddQ(string(k))).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: k, Data: []byte("hi")})
		}
	})
}

// --- bad_shape: goodbye -------------------------------------------------------------

// R15: reason is one of DEVICE_GOODBYE_REASONS.
func TestGoodbyeReasonMustBeInTheClosedSet(t *testing.T) {
	var cases []ddRejectCase
	for _, r := range []string{"", "Shutdown", "SHUTDOWN", "shutdown ", "restart", "user-stop", "userStop", "draining", "revoked", "superseded"} {
		cases = append(cases, ddBad("reason "+ddQ(r), ddGoodbye().set("reason", ddQ(r)).String(), "reason"))
	}
	ddRunRejects(t, cases)
	for _, r := range GoodbyeReasons() {
		t.Run("accepts "+string(r), func(t *testing.T) {
			ddExpectFrame(t, ddGoodbye().set("reason", ddQ(string(r))).String(), &Goodbye{Gen: 7, Reason: r, GraceMs: ptr(int64(1000))})
		})
	}
}

// --- bad_shape: duplicate names -------------------------------------------------------

// A repeated member name makes a frame ambiguous; this package refuses it as
// bad_shape (the frame is JSON, so not not_json), at any depth.
func TestDuplicateMemberNamesAreBadShape(t *testing.T) {
	stat := func(o string) string { return ddResult(o).String() }
	cases := []ddRejectCase{
		ddBad("top-level gen twice, same value", ddGenAck().add("gen", `"7"`).String(), ddAnyField),
		ddBad("top-level gen twice, different values", ddGenAck().add("gen", `"8"`).String(), ddAnyField),
		ddBad("top-level t twice", ddGenAck().add("t", `"generationAck"`).String(), ddAnyField),
		ddBad("top-level t twice, different types", ddGenAck().add("t", `"heartbeat"`).String(), ddAnyField),
		ddBad("top-level name spelled with an escape", ddGenAck().String()[:len(ddGenAck().String())-1]+`,"g\u0065n":"7"}`, ddAnyField),
		ddBad("top-level unknown member twice", ddGenAck().add("x", `1`).add("x", `2`).String(), ddAnyField),
		ddBad("hello deviceId twice", ddHello().add("deviceId", ddQ(ddDevID)).String(), ddAnyField),
		ddBad("chunk dataB64 twice", ddStdout().add("dataB64", `"aGk="`).String(), ddAnyField),
		ddBad("nested in outcome: ok twice", stat(`{"ok":true,"ok":true,"kind":"void"}`), ddAnyField),
		ddBad("nested in outcome: ok true then false", stat(`{"ok":true,"kind":"void","ok":false,"errorCode":"unknown","message":"m"}`), ddAnyField),
		ddBad("nested in outcome: kind twice", stat(`{"ok":true,"kind":"void","kind":"read"}`), ddAnyField),
		ddBad("nested in outcome: unknown member twice", stat(`{"ok":true,"kind":"void","x":1,"x":1}`), ddAnyField),
		ddBad("nested in outcome.info", stat(`{"ok":true,"kind":"stat","info":{"path":"/a","path":"/b","kind":"file","size":1,"mtimeMs":1}}`), ddAnyField),
		ddBad("nested in outcome.entries[1]", stat(`{"ok":true,"kind":"stat","entries":[`+ddInfo+`,{"path":"/b","kind":"file","kind":"dir","size":1,"mtimeMs":1}]}`), ddAnyField),
		ddBad("nested in outcome.truncated", stat(`{"ok":true,"kind":"exec","exitCode":0,"truncated":{"stdout":true,"stdout":false}}`), ddAnyField),
		ddBad("nested in hello.platform", ddHello().set("platform", `{"os":"linux","os":"darwin","arch":"a","executorVersion":"v"}`).String(), ddAnyField),
		ddBad("nested in hello.resuming", ddHello().set("resuming", `{"unackedResults":1,"unackedResults":2}`).String(), ddAnyField),
		ddBad("nested in an ignored member", ddGenAck().set("ext", `{"a":{"b":1,"b":2}}`).String(), ddAnyField),
		ddBad("nested in an object inside an ignored array", ddGenAck().set("ext", `[{"b":1,"b":2}]`).String(), ddAnyField),
	}
	ddRunRejects(t, cases)

	t.Run("the same name in different objects is no duplicate", func(t *testing.T) {
		f := ddDecode(t, ddResult(`{"ok":true,"kind":"stat","entries":[`+ddInfo+`,`+ddInfo+`]}`).add("ok", `1`).add("kind", `"x"`).String())
		if got := len(ddOutcomeOf(f).(StatOutcome).Entries); got != 2 {
			t.Errorf("decoded %d entries, want 2", got)
		}
	})
}

// --- bad_shape: identifiers -----------------------------------------------------------

// §2.2: deviceId and instructionId are non-empty strings.
func TestIdentifiersMustBeNonEmpty(t *testing.T) {
	ddRunRejects(t, []ddRejectCase{
		ddBad("hello deviceId empty", ddHello().set("deviceId", `""`).String(), "deviceId"),
		ddBad("result instructionId empty", ddResult(`{"ok":true,"kind":"void"}`).set("instructionId", `""`).String(), "instructionId"),
		ddBad("chunk instructionId empty", ddStdout().set("instructionId", `""`).String(), "instructionId"),
		ddBad("exit chunk instructionId empty", ddExit().set("instructionId", `""`).String(), "instructionId"),
	})
}

// --- bad_shape: outcomes ----------------------------------------------------------------

// §3.3: an outcome is exactly one of the arms; an arm of the wrong shape is
// bad_shape, naming the field under outcome.
func TestOutcomeArmsOfTheWrongShape(t *testing.T) {
	res := func(o string) string { return ddResult(o).String() }
	fail := ddFields{{"ok", `false`}, {"errorCode", `"not_found"`}, {"message", `"no such file: /w/a"`}}
	exec := ddFields{{"ok", `true`}, {"kind", `"exec"`}, {"exitCode", `0`}}
	write := ddFields{{"ok", `true`}, {"kind", `"write"`}, {"canonicalPath", `"/w/a"`}}
	cancelled := ddFields{{"ok", `true`}, {"kind", `"cancelled"`}, {"state", `"killed"`}}
	stat := ddFields{{"ok", `true`}, {"kind", `"stat"`}}
	info := func(fi ddFields) string { return res(stat.set("info", fi.String()).String()) }

	cases := []ddRejectCase{
		ddBad("empty outcome", res(`{}`), "outcome.ok"),
		ddBad("missing ok on a success arm", res(`{"kind":"void"}`), "outcome.ok"),
		ddBad("missing ok on a failure arm", res(fail.without("ok").String()), "outcome.ok"),
		ddBad("ok a string", res(`{"ok":"true","kind":"void"}`), "outcome.ok"),
		ddBad("ok a number", res(`{"ok":1,"kind":"void"}`), "outcome.ok"),
		ddBad("ok null", res(`{"ok":null,"kind":"void"}`), "outcome.ok"),
		ddBad("ok an object", res(`{"ok":{},"kind":"void"}`), "outcome.ok"),

		ddBad("ok:false without errorCode", res(fail.without("errorCode").String()), "outcome.errorCode"),
		ddBad("ok:false without message", res(fail.without("message").String()), "outcome.message"),
		ddBad("ok:false with neither", res(`{"ok":false}`), ddAnyField),
		ddBad("ok:false with a kind instead", res(`{"ok":false,"kind":"void"}`), ddAnyField),
		ddBad("errorCode a number", res(fail.set("errorCode", `404`).String()), "outcome.errorCode"),
		ddBad("errorCode null", res(fail.set("errorCode", `null`).String()), "outcome.errorCode"),
		ddBad("message a number", res(fail.set("message", `5`).String()), "outcome.message"),
		ddBad("message null", res(fail.set("message", `null`).String()), "outcome.message"),
	}
	for _, code := range []string{"", "NOT_FOUND", "Not_Found", "not-found", "notFound", "enoent", "error", "cancelled", "killed", "not_found "} {
		cases = append(cases, ddBad("errorCode "+ddQ(code), res(fail.set("errorCode", ddQ(code)).String()), "outcome.errorCode"))
	}
	cases = append(cases,
		ddBad("ok:true without kind", res(`{"ok":true}`), "outcome.kind"),
		ddBad("ok:true with only the failure fields", res(`{"ok":true,"errorCode":"not_found","message":"m"}`), "outcome.kind"),
		ddBad("kind a number", res(`{"ok":true,"kind":1}`), "outcome.kind"),
		ddBad("kind null", res(`{"ok":true,"kind":null}`), "outcome.kind"),
	)
	for _, k := range []string{"", "Exec", "EXEC", "execStream", "exec2", "ok", "failure", "fileInfo", "stats", "cancel"} {
		cases = append(cases, ddBad("kind "+ddQ(k), res(`{"ok":true,"kind":`+ddQ(k)+`}`), "outcome.kind"))
	}
	cases = append(cases,
		ddBad("exec without exitCode", res(exec.without("exitCode").String()), "outcome.exitCode"),
		ddBad("exec exitCode fractional", res(exec.set("exitCode", `1.5`).String()), "outcome.exitCode"),
		ddBad("exec exitCode exponent", res(exec.set("exitCode", `1e0`).String()), "outcome.exitCode"),
		ddBad("exec exitCode a string", res(exec.set("exitCode", `"0"`).String()), "outcome.exitCode"),
		ddBad("exec exitCode null", res(exec.set("exitCode", `null`).String()), "outcome.exitCode"),
		ddBad("exec truncated a boolean", res(exec.set("truncated", `true`).String()), "outcome.truncated"),
		ddBad("exec truncated null", res(exec.set("truncated", `null`).String()), "outcome.truncated"),
		ddBad("exec truncated.stdout a string", res(exec.set("truncated", `{"stdout":"true","stderr":false}`).String()), "outcome.truncated.stdout"),
		ddBad("exec truncated.stderr a number", res(exec.set("truncated", `{"stdout":true,"stderr":0}`).String()), "outcome.truncated.stderr"),

		ddBad("write without canonicalPath", res(write.without("canonicalPath").String()), "outcome.canonicalPath"),
		ddBad("write canonicalPath empty", res(write.set("canonicalPath", `""`).String()), "outcome.canonicalPath"),
		ddBad("write canonicalPath a number", res(write.set("canonicalPath", `5`).String()), "outcome.canonicalPath"),
		ddBad("write canonicalPath null", res(write.set("canonicalPath", `null`).String()), "outcome.canonicalPath"),
		ddBad("write inode a number", res(write.set("inode", `42`).String()), "outcome.inode"),
		ddBad("write created a string", res(write.set("created", `"true"`).String()), "outcome.created"),
		ddBad("write created null", res(write.set("created", `null`).String()), "outcome.created"),

		ddBad("cancelled without state", res(cancelled.without("state").String()), "outcome.state"),
		ddBad("cancelled state a number", res(cancelled.set("state", `0`).String()), "outcome.state"),
	)
	for _, s := range []string{"", "Killed", "running", "started", "not-started", "notStarted", "cancelled", "aborted"} {
		cases = append(cases, ddBad("cancelled state "+ddQ(s), res(cancelled.set("state", ddQ(s)).String()), "outcome.state"))
	}
	for _, n := range []string{"path", "kind", "size", "mtimeMs"} {
		cases = append(cases,
			ddBad("stat info without "+n, info(ddInfoFields().without(n)), "outcome.info."+n),
			ddBad("stat entry without "+n, res(stat.set("entries", `[`+ddInfo+`,`+ddInfoFields().without(n).String()+`]`).String()), "outcome.entries[1]."+n),
		)
	}
	cases = append(cases,
		ddBad("stat info empty", info(ddFields{}), ddAnyField),
		ddBad("stat info a string", res(stat.set("info", `"/w/a"`).String()), "outcome.info"),
		ddBad("stat info an array", res(stat.set("info", `[`+ddInfo+`]`).String()), "outcome.info"),
		ddBad("stat info null", res(stat.set("info", `null`).String()), "outcome.info"),
		ddBad("stat info.path a number", info(ddInfoFields().set("path", `1`)), "outcome.info.path"),
		ddBad("stat info.kind outside the set", info(ddInfoFields().set("kind", `"fifo"`)), "outcome.info.kind"),
		ddBad("stat info.kind upper-case", info(ddInfoFields().set("kind", `"File"`)), "outcome.info.kind"),
		ddBad("stat info.kind a number", info(ddInfoFields().set("kind", `1`)), "outcome.info.kind"),
		ddBad("stat info.size a string", info(ddInfoFields().set("size", `"12"`)), "outcome.info.size"),
		ddBad("stat info.mtimeMs fractional", info(ddInfoFields().set("mtimeMs", `1700000000000.5`)), "outcome.info.mtimeMs"),
		ddBad("stat info.mode a string", info(ddInfoFields().set("mode", `"0644"`)), "outcome.info.mode"),
		ddBad("stat info.mode null", info(ddInfoFields().set("mode", `null`)), "outcome.info.mode"),

		ddBad("stat entries an object", res(stat.set("entries", ddInfo).String()), "outcome.entries"),
		ddBad("stat entries a string", res(stat.set("entries", `"[]"`).String()), "outcome.entries"),
		ddBad("stat entries null", res(stat.set("entries", `null`).String()), "outcome.entries"),
		ddBad("stat entries a number", res(stat.set("entries", `0`).String()), "outcome.entries"),
		ddBad("stat entry a string", res(stat.set("entries", `["/w/a"]`).String()), "outcome.entries[0]"),
		ddBad("stat entry a number", res(stat.set("entries", `[1]`).String()), "outcome.entries[0]"),
		ddBad("stat entry null", res(stat.set("entries", `[null]`).String()), "outcome.entries[0]"),
		ddBad("stat entry an array", res(stat.set("entries", `[[]]`).String()), "outcome.entries[0]"),
		ddBad("stat second entry of the wrong type", res(stat.set("entries", `[`+ddInfo+`,true]`).String()), "outcome.entries[1]"),
		ddBad("stat entry kind outside the set", res(stat.set("entries", `[`+ddInfoFields().set("kind", `"socket"`).String()+`]`).String()), "outcome.entries[0].kind"),

		ddBad("stat linkTarget a number", res(stat.set("linkTarget", `5`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget true", res(stat.set("linkTarget", `true`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget false", res(stat.set("linkTarget", `false`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget an object", res(stat.set("linkTarget", `{}`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget an array", res(stat.set("linkTarget", `["/t"]`).String()), "outcome.linkTarget"),

		ddBad("stat existsValue a string", res(stat.set("existsValue", `"true"`).String()), "outcome.existsValue"),
		ddBad("stat existsValue the string false", res(stat.set("existsValue", `"false"`).String()), "outcome.existsValue"),
		ddBad("stat existsValue a number", res(stat.set("existsValue", `1`).String()), "outcome.existsValue"),
		ddBad("stat existsValue null", res(stat.set("existsValue", `null`).String()), "outcome.existsValue"),

		ddBad("stat canonicalPath empty", res(stat.set("canonicalPath", `""`).String()), "outcome.canonicalPath"),
		ddBad("stat canonicalPath a number", res(stat.set("canonicalPath", `5`).String()), "outcome.canonicalPath"),
		ddBad("stat canonicalPath null", res(stat.set("canonicalPath", `null`).String()), "outcome.canonicalPath"),
	)
	ddRunRejects(t, cases)
}

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
				if !reflect.DeepEqual(f, c.want) {
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
