package protocol

import (
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

// Seeds: the spec's frame shapes (§2.2, §2.3, §3.3, §3.4, §4).
var deviceFrameSeeds = []string{
	`{"t":"hello","protocolVersion":1,"deviceId":"dev_01J8ZQ4T9X0000000000000000","epoch":"01J8ZQ4T9X7M3K5N6P8R0S2V4W","signatureB64":"c2ln","platform":{"os":"linux","arch":"amd64","executorVersion":"0.1.0"},"workspaceRoot":"/home/u/w","pathFlavor":"posix","supports":["exec","execStream","exists"],"resuming":{"unackedResults":2}}`,
	`{"t":"generationAck","gen":"7"}`,
	`{"t":"heartbeat","gen":"7","seq":3,"inflight":["ins_01J8ZQ4T9X7M3K5N6P8R0S2V4W"]}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":0,"outcome":{"ok":true,"kind":"exec","exitCode":0,"truncated":{"stdout":true,"stderr":false}}}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":{"ok":true,"kind":"read"}}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":{"ok":true,"kind":"stat","info":{"path":"/a","kind":"file","size":3,"mtimeMs":1700000000000,"mode":420},"entries":[],"existsValue":false,"canonicalPath":"/a","linkTarget":null}}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":{"ok":true,"kind":"write","canonicalPath":"/a","inode":"42","created":true}}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":{"ok":true,"kind":"void"}}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":{"ok":true,"kind":"cancelled","state":"killed"}}`,
	`{"t":"result","gen":"7","instructionId":"ins_1","deviceSeq":1,"outcome":{"ok":false,"errorCode":"not_found","message":"no such file: /a"}}`,
	`{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":0,"kind":"stdout","dataB64":"aGVsbG8K"}`,
	`{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":0,"kind":"data","dataB64":"\/\/4A"}`,
	`{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":0,"kind":"stdout","dataB64":"\u0061Gk="}`,
	`{"t":"chunk","gen":"7","instructionId":"ins_1","streamSeq":1,"kind":"exit","exitCode":0}`,
	`{"t":"goodbye","gen":"7","reason":"sleep","graceMs":5000}`,
	`{"t":"chunk","gen":"07","instructionId":"ins_1","streamSeq":0,"kind":"stdout","dataB64":"aGVsbG8"}`,
	`[{"t":"hello"}]`,
}

var serverFrameSeeds = []string{
	`{"t":"challenge","nonce":"bm9uY2UtdGVzdC12ZWN0b3I=","protocolVersion":1}`,
	`{"t":"helloAck","ok":true,"heartbeatIntervalMs":15000,"maxInflight":4,"gen":"7","pendingInstructions":["ins_1"],"chunkWatermarks":{"ins_1":-1}}`,
	`{"t":"helloReject","code":"protocol_version_unsupported","minProtocolVersion":1}`,
	`{"t":"instruction","gen":"7","instructionId":"ins_1","rootSessionId":"ses_1","issuedSeq":0,"kind":"exec","args":{"command":"echo hi"},"cwd":"/w","shellEnv":{"A":"1"},"timeoutMs":30000}`,
	`{"t":"instruction","gen":"7","instructionId":"ins_2","rootSessionId":"ses_1","issuedSeq":1,"kind":"writeFileGuarded","args":{"path":"/w/a","contentLen":3,"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","expect":{"canonicalPath":"/w/a","fileId":"42","noFollow":true}},"timeoutMs":30000}`,
	`{"t":"instruction","gen":"7","instructionId":"ins_3","rootSessionId":"ses_1","issuedSeq":2,"kind":"readTextLines","args":{"path":"/w/a","limit":10},"timeoutMs":30000}`,
	`{"t":"payload","gen":"7","instructionId":"ins_2","part":"begin","totalLen":3,"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}`,
	`{"t":"payload","gen":"7","instructionId":"ins_2","part":"chunk","offset":0,"dataB64":"YWJj"}`,
	`{"t":"cancel","gen":"7","instructionId":"ins_1"}`,
	`{"t":"resultAck","gen":"7","instructionId":"ins_1"}`,
	`{"t":"chunkAck","gen":"7","instructionId":"ins_1","upToStreamSeq":3}`,
	`{"t":"bye","gen":"7","reason":"superseded"}`,
	`{"t":"ping"}`,
}

// FuzzDecodeDeviceFrame: never panic; every refusal carries exactly one
// stage-1 reason; an accepted frame re-encodes and decodes to the same value.
func FuzzDecodeDeviceFrame(f *testing.F) {
	for _, s := range deviceFrameSeeds {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, binary bool) {
		kind := TextMessage
		if binary {
			kind = BinaryMessage
		}
		frame, err := DecodeDeviceFrame(kind, data, MaxFrameBytes)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || !fe.Reason.Valid() {
				t.Fatalf("error %v is not a FrameError with a DEVICE_FRAME_REJECT_REASONS reason", err)
			}
			return
		}
		if binary {
			t.Fatal("a binary frame was accepted")
		}
		mustNotAlias(t, data, func(b []byte) (any, error) { return DecodeDeviceFrame(kind, b, MaxFrameBytes) })
		checkDataB64(t, data, frame)
		again := roundTripDevice(t, frame)
		if !reflect.DeepEqual(unpooled(frame), unpooled(again)) {
			t.Fatalf("round trip changed the frame:\n first %#v\nsecond %#v", frame, again)
		}
	})
}

// mustNotAlias: a decoded frame owns its memory — the lane and the executor
// reuse read buffers, so overwriting the input must not change the frame.
// The fuzz engine's input must not be modified, so the frame is decoded
// again from a copy, which is then clobbered.
func mustNotAlias(t *testing.T, data []byte, decode func([]byte) (any, error)) {
	t.Helper()
	buf := bytes.Clone(data)
	frame, err := decode(buf)
	if err != nil {
		t.Fatalf("decoding a copy of an accepted input failed: %v", err)
	}
	before, err := json.Marshal(frame)
	if err != nil {
		return // the round trip below reports it
	}
	for i := range buf {
		buf[i] = '#'
	}
	after, _ := json.Marshal(frame)
	if !bytes.Equal(before, after) {
		t.Fatalf("the decoded frame changed with its input buffer:\n%s\n%s", before, after)
	}
}

// checkDataB64: an accepted stdout, stderr or data chunk carries exactly
// the standard encoding of its data as DataB64, in memory of its own (the
// lane passes it on after the read buffer is reused); an exit chunk none.
func checkDataB64(t *testing.T, data []byte, frame DeviceFrame) {
	t.Helper()
	c, ok := frame.(*Chunk)
	if !ok {
		return
	}
	if c.Kind == ChunkExit {
		if c.DataB64 != nil {
			t.Fatalf("an exit chunk carries DataB64 %q", c.DataB64)
		}
		return
	}
	want := base64.StdEncoding.EncodeToString(c.Data)
	if c.DataB64 == nil || string(c.DataB64) != want {
		t.Fatalf("DataB64 %q, want the encoding of Data %q", c.DataB64, want)
	}
	buf := bytes.Clone(data)
	f, _ := DecodeDeviceFrame(TextMessage, buf, MaxFrameBytes)
	for i := range buf {
		buf[i] = '#'
	}
	if got := f.(*Chunk); string(got.DataB64) != want || base64.StdEncoding.EncodeToString(got.Data) != want {
		t.Fatalf("the chunk's DataB64 or Data changed with its input buffer: %q", got.DataB64)
	}
}

func roundTripDevice(t *testing.T, frame DeviceFrame) DeviceFrame {
	t.Helper()
	b, err := json.Marshal(frame)
	if err != nil {
		t.Fatalf("an accepted frame does not re-encode: %v", err)
	}
	again, err := DecodeDeviceFrame(TextMessage, b, MaxFrameBytes)
	if err != nil {
		t.Fatalf("a re-encoded frame is refused: %v\n%s", err, b)
	}
	return again
}

// FuzzDecodeServerFrame: the same properties for the executor's decoder; an
// InstructionError must name the instruction and an answerable code.
func FuzzDecodeServerFrame(f *testing.F) {
	for _, s := range serverFrameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := DecodeServerFrame(TextMessage, data)
		if err != nil {
			var fe *FrameError
			var ie *InstructionError
			switch {
			case errors.As(err, &fe):
				if !fe.Reason.Valid() {
					t.Fatalf("reason %q is not in DEVICE_FRAME_REJECT_REASONS", fe.Reason)
				}
			case errors.As(err, &ie):
				if ie.InstructionID == "" || (ie.Code != ErrNotSupported && ie.Code != ErrInvalid) {
					t.Fatalf("instruction error %+v cannot be answered", ie)
				}
			default:
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		mustNotAlias(t, data, func(b []byte) (any, error) { return DecodeServerFrame(TextMessage, b) })
		b, err := json.Marshal(frame)
		if err != nil {
			t.Fatalf("an accepted frame does not re-encode: %v", err)
		}
		again, err := DecodeServerFrame(TextMessage, b)
		if err != nil {
			t.Fatalf("a re-encoded frame is refused: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(frame, again) {
			t.Fatalf("round trip changed the frame:\n first %#v\nsecond %#v", frame, again)
		}
	})
}

// FuzzCanonicalBase64: accepted exactly when StdEncoding re-encodes the
// decoded bytes to the same string (§4 Encoding).
func FuzzCanonicalBase64(f *testing.F) {
	for _, s := range []string{"", "aGk=", "aGk", "aGk==", "aGl=", "a-_b", "aG\nk=", "YWJj", "YQ==", "YR=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		decoded, err := base64.StdEncoding.DecodeString(s)
		canonical := err == nil && base64.StdEncoding.EncodeToString(decoded) == s
		if got := CanonicalBase64(s); got != canonical {
			t.Fatalf("CanonicalBase64(%q) = %v, want %v", s, got, canonical)
		}
	})
}

// FuzzDecodeULID16: an accepted epoch is exactly the upper-case Crockford
// spelling of its 128 bits.
func FuzzDecodeULID16(f *testing.F) {
	for _, s := range []string{"01J8ZQ4T9X7M3K5N6P8R0S2V4W", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01j8zq4t9x7m3k5n6p8r0s2v4w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := DecodeULID16(s)
		if !ok {
			return
		}
		if enc := encodeULID(b); enc != s {
			t.Fatalf("DecodeULID16(%q) accepted a spelling that re-encodes as %q", s, enc)
		}
	})
}

// encodeULID is the reference encoder: 128 bits, 5 at a time, most
// significant first, in 26 characters.
func encodeULID(b [16]byte) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var out [26]byte
	var hi, lo uint64
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// FuzzFastPayloadAgreesWithTheStrictDecoder: whatever the payload fast
// path accepts, the strict decoder accepts too, with an equal value.
func FuzzFastPayloadAgreesWithTheStrictDecoder(f *testing.F) {
	for _, s := range serverFrameSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"t":"payload","gen":"0","instructionId":"ins_x","part":"chunk","offset":0,"dataB64":""}`))
	f.Add([]byte(`{"t":"payload","gen":"9","instructionId":"é","part":"chunk","offset":262144,"dataB64":"+/8="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := fastPayload(data)
		if !ok {
			return
		}
		o, t2, ferr := readEnvelope(TextMessage, data, MaxFrameBytes)
		if ferr != nil || t2 != string(TypePayload) {
			t.Fatalf("the fast path accepted %q, the strict envelope refused it: %v", data, ferr)
		}
		strict := readPayload(o)
		if o.s.err != nil {
			t.Fatalf("the fast path accepted %q, the strict decoder refused it: %v", data, o.s.err)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("fast %#v != strict %#v", fast, strict)
		}
	})
}

// FuzzFastChunkAgreesWithTheStrictDecoder: whatever the chunk fast path
// accepts, the strict decoder accepts too, with an equal value.
func FuzzFastChunkAgreesWithTheStrictDecoder(f *testing.F) {
	for _, s := range deviceFrameSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"t":"chunk","gen":"0","instructionId":"ins_x","streamSeq":0,"kind":"data","dataB64":""}`))
	f.Add([]byte(`{"t":"chunk","gen":"7","instructionId":"é","streamSeq":12,"kind":"stderr","dataB64":"+/8="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := fastChunk(data)
		if !ok {
			return
		}
		o, t2, ferr := readEnvelope(TextMessage, data, MaxFrameBytes)
		if ferr != nil || t2 != string(TypeChunk) {
			t.Fatalf("the fast path accepted %q, the strict envelope refused it: %v", data, ferr)
		}
		strict := readChunk(o)
		if o.s.err != nil {
			t.Fatalf("the fast path accepted %q, the strict decoder refused it: %v", data, o.s.err)
		}
		if !reflect.DeepEqual(unpooled(fast), unpooled(strict)) {
			t.Fatalf("fast %#v != strict %#v", fast, strict)
		}
	})
}
