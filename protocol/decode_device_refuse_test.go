package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

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
