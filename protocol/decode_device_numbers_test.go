package protocol

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

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
