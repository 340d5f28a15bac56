package protocol

import (
	"bytes"
	"unicode/utf8"
)

// fastChunk decodes a data-carrying chunk frame spelled exactly as
// Chunk.AppendJSON writes it, without tokenizing the (large) base64 string
// twice. It only ever accepts: anything that deviates from the template in
// any byte returns ok false, and the caller runs the strict decoder, whose
// verdict then stands. For a frame it accepts, the strict decoder accepts
// too and returns an equal value (FuzzFastChunkAgreesWithTheStrictDecoder):
// every string in the template is escape-free, control-free and valid
// UTF-8, the keys are distinct, gen and streamSeq are canonical, and the
// base64 passes the same canonical check.
func fastChunk(data []byte) (*Chunk, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"t":"chunk","gen":"`))
	if !ok {
		return nil, false
	}
	genText, rest, ok := cutString(rest)
	if !ok || !canonicalDecimal(string(genText)) {
		return nil, false
	}
	gen, err := ParseGen(string(genText))
	if err != nil {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"instructionId":"`)); !ok {
		return nil, false
	}
	id, rest, ok := cutString(rest)
	if !ok || len(id) == 0 || !plainString(id) {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"streamSeq":`)); !ok {
		return nil, false
	}
	end := bytes.IndexByte(rest, ',')
	if end < 1 || (rest[0] == '0' && end > 1) {
		return nil, false
	}
	seq, problem := safeInt(rest[:end])
	if problem != "" || seq < 0 || rest[0] == '-' {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest[end:], []byte(`,"kind":"`)); !ok {
		return nil, false
	}
	kindText, rest, ok := cutString(rest)
	kind := ChunkKind(kindText)
	if !ok || (kind != ChunkStdout && kind != ChunkStderr && kind != ChunkData) {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"dataB64":"`)); !ok {
		return nil, false
	}
	b64, rest, ok := cutString(rest)
	if !ok || string(rest) != "}" {
		return nil, false
	}
	raw, err := decodeCanonicalBase64(b64)
	if err != nil {
		return nil, false
	}
	return &Chunk{Gen: gen, InstructionID: string(id), StreamSeq: seq, Kind: kind, Data: raw}, true
}

// cutString splits at the next quote: the string's bytes and what follows
// the quote.
func cutString(b []byte) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '"')
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

// plainString: valid UTF-8 with no backslash and no control character, so
// that its JSON spelling is its value.
func plainString(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}
