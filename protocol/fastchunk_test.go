package protocol

import (
	"reflect"
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
		if err != nil || !reflect.DeepEqual(fast, strict) {
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
