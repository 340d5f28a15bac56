package protocol

import (
	"encoding/base64"
	"errors"
	"fmt"
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
	want = withDataB64(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeDeviceFrame(%s)\n got %#v\nwant %#v", ddShow([]byte(frame)), ddDeref(got), ddDeref(want))
	}
}

// withDataB64 is want as DecodeDeviceFrame returns it: a stdout, stderr or
// data chunk also carries its data's canonical base64 text.
func withDataB64(want DeviceFrame) DeviceFrame {
	c, ok := want.(*Chunk)
	if !ok || c.Kind == ChunkExit || c.DataB64 != nil {
		return want
	}
	cc := *c
	cc.DataB64 = []byte(base64.StdEncoding.EncodeToString(c.Data))
	return &cc
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
