package api

import (
	"bytes"

	"github.com/sema-agent/sema/protocol"
)

// The fast path of EventReader.Next: a stdout, stderr or data chunk line
// spelled exactly as the lane writes it,
//
//	{"event":"chunk","kind":"stdout","streamSeq":7,"dataB64":"aGk="}
//
// and nothing else. It only ever accepts: a line that deviates in any byte
// (another order or spacing, an escape, a sign, a leading zero, a number
// past 2^53, base64 that is not canonical) is left to the slow path, whose
// verdict then stands. What it accepts, encoding/json reads to an equal
// Event (FuzzEventReaderAgreesWithJSON): the keys are distinct and exact,
// the strings escape-free, and canonical base64 is plain JSON text.

var (
	chunkLineHead = []byte(`{"event":"chunk","kind":"`)
	chunkLineSeq  = []byte(`","streamSeq":`)
	chunkLineData = []byte(`,"dataB64":"`)
	chunkLineTail = "\"}\n"
)

// maxFastSeqDigits keeps streamSeq under 2^53 (§4: a safe integer).
const maxFastSeqDigits = 15

func (r *EventReader) fastChunk(line []byte) (Event, bool) {
	rest, ok := bytes.CutPrefix(line, chunkLineHead)
	if !ok {
		return Event{}, false
	}
	var kind protocol.ChunkKind
	for _, k := range []protocol.ChunkKind{protocol.ChunkStdout, protocol.ChunkStderr, protocol.ChunkData} {
		if after, found := bytes.CutPrefix(rest, []byte(k)); found {
			kind, rest = k, after
			break
		}
	}
	if kind == "" {
		return Event{}, false
	}
	if rest, ok = bytes.CutPrefix(rest, chunkLineSeq); !ok {
		return Event{}, false
	}
	seq, rest, ok := cutCount(rest)
	if !ok {
		return Event{}, false
	}
	if rest, ok = bytes.CutPrefix(rest, chunkLineData); !ok {
		return Event{}, false
	}
	text, ok := bytes.CutSuffix(rest, []byte(chunkLineTail))
	if !ok || bytes.IndexByte(text, '"') >= 0 {
		return Event{}, false
	}
	data, err := protocol.AppendDecodeCanonicalBase64(r.data[:0], text)
	if err != nil {
		return Event{}, false // the slow path says what is wrong
	}
	if data == nil {
		data = []byte{}
	}
	r.data = data
	return Event{Event: EventChunk, Kind: kind, StreamSeq: seq, Data: data}, true
}

// cutCount takes a canonical decimal of at most maxFastSeqDigits digits.
func cutCount(b []byte) (int64, []byte, bool) {
	i := 0
	for i < len(b) && i <= maxFastSeqDigits && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i > maxFastSeqDigits || (b[0] == '0' && i > 1) {
		return 0, nil, false
	}
	var n int64
	for _, c := range b[:i] {
		n = n*10 + int64(c-'0')
	}
	return n, b[i:], true
}
