package protocol

import (
	"bytes"
	"unicode/utf8"
)

// The fast paths decode the two data-carrying frames — a device's output
// chunk and the lane's write payload chunk — spelled exactly as this
// package's encoders write them (Chunk.AppendJSON, Payload.AppendJSON),
// without tokenizing the large base64 string twice. They only ever accept:
// anything that deviates from the template in any byte returns ok false,
// and the caller runs the strict decoder, whose verdict then stands. For a
// frame a fast path accepts, the strict decoder accepts too and returns an
// equal value (FuzzFastChunkAgreesWithTheStrictDecoder,
// FuzzFastPayloadAgreesWithTheStrictDecoder): every string in a template is
// escape-free, control-free and valid UTF-8, the keys are distinct, gen and
// the integers are canonical, and the base64 passes the same canonical
// check.

// fastChunk decodes a stdout, stderr or data chunk frame.
func fastChunk(data []byte) (*Chunk, bool) {
	s := template{rest: data, ok: true}
	s.literal(`{"t":"chunk","gen":"`)
	gen := s.gen()
	s.literal(`,"instructionId":"`)
	id := s.id()
	s.literal(`,"streamSeq":`)
	seq := s.count(',')
	s.literal(`,"kind":"`)
	kind := ChunkKind(s.str())
	if kind != ChunkStdout && kind != ChunkStderr && kind != ChunkData {
		return nil, false
	}
	s.literal(`,"dataB64":"`)
	c := &Chunk{Gen: gen, InstructionID: id, StreamSeq: seq, Kind: kind}
	c.Data, c.DataB64, c.pooled = s.base64Keeping()
	if !s.end() {
		c.Release()
		return nil, false
	}
	return c, true
}

// fastPayload decodes a payload frame of part chunk.
func fastPayload(data []byte) (*Payload, bool) {
	s := template{rest: data, ok: true}
	s.literal(`{"t":"payload","gen":"`)
	gen := s.gen()
	s.literal(`,"instructionId":"`)
	id := s.id()
	s.literal(`,"part":"chunk","offset":`)
	offset := s.count(',')
	s.literal(`,"dataB64":"`)
	raw := s.base64()
	if !s.end() {
		return nil, false
	}
	return &Payload{Gen: gen, InstructionID: id, Part: PartChunk, Offset: offset, Data: raw}, true
}

// template matches a frame against an encoder's spelling, left to right.
// Once a step fails, ok is false and every later step is a no-op.
type template struct {
	rest []byte
	ok   bool
}

func (s *template) literal(p string) {
	if s.ok {
		s.rest, s.ok = bytes.CutPrefix(s.rest, []byte(p))
	}
}

// str takes the bytes up to the next quote and the quote.
func (s *template) str() []byte {
	if !s.ok {
		return nil
	}
	var b []byte
	b, s.rest, s.ok = cutString(s.rest)
	return b
}

// gen takes a canonical decimal gen and its closing quote.
func (s *template) gen() Gen {
	text := s.str()
	if !s.ok || !canonicalDecimal(string(text)) {
		s.ok = false
		return 0
	}
	g, err := ParseGen(string(text))
	s.ok = err == nil
	return g
}

// id takes a non-empty plain string and its closing quote.
func (s *template) id() string {
	b := s.str()
	if !s.ok || len(b) == 0 || !plainString(b) {
		s.ok = false
		return ""
	}
	return string(b)
}

// count takes a canonical non-negative safe integer ending before stop.
func (s *template) count(stop byte) int64 {
	if !s.ok {
		return 0
	}
	end := bytes.IndexByte(s.rest, stop)
	if end < 1 || (s.rest[0] == '0' && end > 1) || s.rest[0] == '-' {
		s.ok = false
		return 0
	}
	n, problem := safeInt(s.rest[:end])
	if problem != "" || n < 0 {
		s.ok = false
		return 0
	}
	s.rest = s.rest[end:]
	return n
}

// base64 takes a canonical base64 string and its closing quote.
func (s *template) base64() []byte {
	text := s.str()
	if !s.ok {
		return nil
	}
	raw, err := decodeCanonicalBase64(text)
	if err != nil {
		s.ok = false
		return nil
	}
	return raw
}

// base64Keeping is base64 that also keeps a copy of the text.
func (s *template) base64Keeping() (raw, text []byte, pooled *chunkBuf) {
	b := s.str()
	if !s.ok {
		return nil, nil, nil
	}
	raw, text, pooled, err := decodeCanonicalBase64Keeping(b)
	if err != nil {
		s.ok = false
		return nil, nil, nil
	}
	return raw, text, pooled
}

// end: exactly the closing brace remains.
func (s *template) end() bool { return s.ok && string(s.rest) == "}" }

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
