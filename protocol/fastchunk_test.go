package protocol

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"strconv"
	"testing"
)

// Every data-carrying chunk this package encodes takes the fast path, and
// comes out equal to what the strict decoder makes of it.
func TestFastChunkTakesEveryEncodedDataChunk(t *testing.T) {
	for i, c := range []*Chunk{
		{Gen: 0, InstructionID: "ins_1", StreamSeq: 0, Kind: ChunkStdout, Data: []byte{}},
		{Gen: 7, InstructionID: "ins_é", StreamSeq: 12, Kind: ChunkStderr, Data: []byte("oops\n")},
		{Gen: 1<<64 - 1, InstructionID: "ins_x", StreamSeq: MaxSafeInteger, Kind: ChunkData, Data: make([]byte, 70000)},
	} {
		b, err := c.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := fastChunk(b)
		if !ok {
			t.Fatalf("chunk %d (%s) missed the fast path", i, b[:60])
		}
		strict, err := DecodeDeviceFrame(TextMessage, append([]byte(" "), b...), MaxFrameBytes) // a leading space forces the strict path
		if err != nil || !reflect.DeepEqual(unpooled(fast), unpooled(strict)) {
			t.Fatalf("chunk %d: fast %#v, strict %#v, %v", i, fast, strict, err)
		}
	}
}

// Near misses fall back to the strict decoder, whose verdict stands.
func TestFastChunkLeavesEveryDeviationToTheStrictDecoder(t *testing.T) {
	for _, s := range []string{
		`{"t":"chunk","gen":"07","instructionId":"i","streamSeq":0,"kind":"stdout","dataB64":"aGk="}`,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":01,"kind":"stdout","dataB64":"aGk="}`,
		`{"t":"chunk","gen":"7","instructionId":"i\"","streamSeq":0,"kind":"stdout","dataB64":"aGk="}`,
		`{"t":"chunk","gen":"7","instructionId":"","streamSeq":0,"kind":"stdout","dataB64":"aGk="}`,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":-1,"kind":"stdout","dataB64":"aGk="}`,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":0,"kind":"exit","dataB64":"aGk="}`,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":0,"kind":"stdout","dataB64":"aGl="}`,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":0,"kind":"stdout","dataB64":"aGk=\n"}`,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":0,"kind":"stdout","dataB64":"aGk="} `,
		`{"t":"chunk","gen":"7","instructionId":"i","streamSeq":0,"kind":"stdout","dataB64":"aGk=","exitCode":0}`,
	} {
		if _, ok := fastChunk([]byte(s)); ok {
			t.Errorf("the fast path accepted %s", s)
		}
	}
}

// Every payload chunk this package encodes takes the fast path, equal to
// the strict decoder's result; begin and commit parts, and near misses,
// take the strict path.
func TestFastPayloadTakesEveryEncodedPayloadChunk(t *testing.T) {
	for i, p := range []*Payload{
		{Gen: 0, InstructionID: "ins_1", Part: PartChunk, Offset: 0, Data: []byte{}},
		{Gen: 7, InstructionID: "ins_é", Part: PartChunk, Offset: 262144, Data: []byte("content\n")},
		{Gen: 1<<64 - 1, InstructionID: "ins_x", Part: PartChunk, Offset: MaxSafeInteger, Data: make([]byte, DefaultPayloadPartBytes)},
	} {
		b, err := p.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := fastPayload(b)
		if !ok {
			t.Fatalf("payload %d (%s) missed the fast path", i, b[:60])
		}
		strict, err := DecodeServerFrame(TextMessage, append([]byte(" "), b...)) // a leading space forces the strict path
		if err != nil || !reflect.DeepEqual(fast, strict) {
			t.Fatalf("payload %d: fast %#v, strict %#v, %v", i, fast, strict, err)
		}
	}
	for _, s := range []string{
		`{"t":"payload","gen":"7","instructionId":"i","part":"begin","totalLen":3}`,
		`{"t":"payload","gen":"7","instructionId":"i","part":"chunk","offset":01,"dataB64":"aGk="}`,
		`{"t":"payload","gen":"7","instructionId":"i","part":"chunk","offset":-1,"dataB64":"aGk="}`,
		`{"t":"payload","gen":"7","instructionId":"i","part":"chunk","offset":9007199254740992,"dataB64":"aGk="}`,
		`{"t":"payload","gen":"7","instructionId":"i","part":"chunk","offset":0,"dataB64":"aGl="}`,
		`{"t":"payload","gen":"7","instructionId":"i","part":"chunk","offset":0,"dataB64":"aGk=","totalLen":3}`,
		`{"t":"payload","gen":"7","instructionId":"","part":"chunk","offset":0,"dataB64":"aGk="}`,
	} {
		if _, ok := fastPayload([]byte(s)); ok {
			t.Errorf("the fast path accepted %s", s)
		}
	}
}

// §4 Encoding: canonical base64 has no line breaks, even where the standard
// library's decoder would skip them and the rest would decode (four of
// them, keeping the length a multiple of four).
func TestBase64WithLineBreaksIsNotCanonical(t *testing.T) {
	for _, s := range []string{
		"YWJj\nYWJj\nYWJj\nYWJj\n",
		"YWJj\r\nYWJj\r\n",
		"\n\n\n\nYWJj",
		"YW\r\r\r\rJj",
		"YWJjZA==\n\n\n\n",
	} {
		if CanonicalBase64(s) {
			t.Errorf("%q was accepted as canonical", s)
		}
	}
	for _, s := range []string{"", "YWJj", "YWJjZA==", "YWJjZGU="} {
		if !CanonicalBase64(s) {
			t.Errorf("%q was refused", s)
		}
	}
}

// The strict path keeps the data's canonical text too: the unescaped
// string, which is the one spelling of the data, not the device's escapes.
func TestStrictChunkKeepsTheCanonicalText(t *testing.T) {
	frame := `{"t":"chunk","gen":"7","instructionId":"i","streamSeq":0,"kind":"data","dataB64":"\/\/4A"}`
	buf := []byte(frame)
	f, err := DecodeDeviceFrame(TextMessage, buf, MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	c := f.(*Chunk)
	if string(c.DataB64) != "//4A" || !reflect.DeepEqual(c.Data, []byte{0xff, 0xfe, 0x00}) {
		t.Errorf("DataB64 %q, Data %x", c.DataB64, c.Data)
	}
	if cap(c.Data) != len(c.Data) {
		t.Errorf("Data's capacity %d reaches past it into the text", cap(c.Data))
	}
}

// unpooled is f without the chunk memory's pool handle, which differs
// between two decodes of one frame while what they decoded is equal.
func unpooled(f DeviceFrame) DeviceFrame {
	c, ok := f.(*Chunk)
	if !ok || c == nil {
		return f
	}
	cc := *c
	cc.pooled = nil
	return &cc
}

func chunkFrame(t *testing.T, seq int64, data []byte) []byte {
	t.Helper()
	b, err := (&Chunk{Gen: 7, InstructionID: "ins_1", StreamSeq: seq, Kind: ChunkStdout, Data: data}).AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A chunk of the recommended size lies in pooled memory, which Release
// hands back; a chunk still held is never overwritten by a later decode,
// and a released one comes back with the new chunk's bytes only.
func TestChunkMemoryIsPooledAndReleased(t *testing.T) {
	for _, size := range []int{RecommendedChunkBytes, 4 * RecommendedChunkBytes} {
		t.Run(strconv.Itoa(size), func(t *testing.T) { chunkMemoryIsPooledAndReleased(t, size) })
	}
	if chunkPoolFor(pooledChunkCap+1) != nil || chunkPoolFor(minPooledLargeChunk-1) != nil || chunkPoolFor(pooledLargeChunkCap+1) != nil {
		t.Error("a chunk between or past the classes took a pooled buffer")
	}
}

func chunkMemoryIsPooledAndReleased(t *testing.T, size int) {
	a := bytes.Repeat([]byte("a"), size)
	b := bytes.Repeat([]byte("b"), size-1)
	fa, err := DecodeDeviceFrame(TextMessage, chunkFrame(t, 0, a), MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	ca := fa.(*Chunk)
	if ca.pooled == nil {
		t.Fatalf("a chunk of %d bytes was not pooled", size)
	}
	fb, _ := DecodeDeviceFrame(TextMessage, chunkFrame(t, 1, b), MaxFrameBytes)
	cb := fb.(*Chunk)
	if !bytes.Equal(ca.Data, a) || string(ca.DataB64) != base64.StdEncoding.EncodeToString(a) {
		t.Fatal("decoding a second chunk changed the first, still held")
	}
	ca.Release()
	if ca.Data != nil || ca.DataB64 != nil || ca.pooled != nil {
		t.Fatalf("a released chunk still has its memory")
	}
	for i := range 3 {
		f, _ := DecodeDeviceFrame(TextMessage, append([]byte(" "), chunkFrame(t, int64(2+i), b)...), MaxFrameBytes)
		c := f.(*Chunk)
		if !bytes.Equal(c.Data, b) || string(c.DataB64) != base64.StdEncoding.EncodeToString(b) || cap(c.Data) != len(c.Data) {
			t.Fatalf("decode %d into reused memory: %d bytes, text %d", i, len(c.Data), len(c.DataB64))
		}
		c.Release()
	}
	if !bytes.Equal(cb.Data, b) {
		t.Fatal("the held chunk changed")
	}
	small, _ := DecodeDeviceFrame(TextMessage, chunkFrame(t, 9, []byte("hi")), MaxFrameBytes)
	if small.(*Chunk).pooled != nil {
		t.Error("a small chunk took a pooled buffer")
	}
	small.(*Chunk).Release() // harmless
}
