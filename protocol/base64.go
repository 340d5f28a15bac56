package protocol

import (
	"errors"
	"sync"

	"github.com/sema-agent/sema/internal/b64"
)

var errNotCanonicalBase64 = errors.New("must be canonical standard base64 (A-Z a-z 0-9 + /, exact = padding, zero padding bits, no line breaks)")

// canonicalLen is the number of bytes s decodes to if it is canonical
// standard base64 (§4 Encoding), judged by its length and padding alone;
// -1 when those already rule it out. A canonical string of length L decodes
// to exactly L/4*3 bytes less one per trailing '='.
func canonicalLen(s []byte) int {
	if len(s)%4 != 0 {
		return -1
	}
	n := len(s) / 4 * 3
	if len(s) > 0 && s[len(s)-1] == '=' {
		n--
		if s[len(s)-2] == '=' {
			n--
		}
	}
	return n
}

// decodeCanonical decodes s into dst, which holds b64.DecodedLen(len(s))
// bytes, and returns the decoded length, or an error unless s is exactly
// what StdEncoding produces. The Strict decoder refuses the URL-safe
// alphabet, missing or extra padding and non-zero padding bits, but skips
// CR and LF. Those are refused by length instead of by scanning for them:
// every skipped line break (there must be four of them, or a multiple, for
// the rest to decode) makes the decoded length at least three bytes
// shorter than canonicalLen.
func decodeCanonical(dst, s []byte) (int, error) {
	want := canonicalLen(s)
	if want < 0 {
		return 0, errNotCanonicalBase64
	}
	n, err := b64.DecodeStrict(dst, s)
	if err != nil || n != want {
		return 0, errNotCanonicalBase64
	}
	return n, nil
}

// decodeCanonicalBase64 accepts exactly the strings StdEncoding produces.
func decodeCanonicalBase64(s []byte) ([]byte, error) {
	if canonicalLen(s) < 0 {
		return nil, errNotCanonicalBase64
	}
	out := make([]byte, b64.DecodedLen(len(s)))
	n, err := decodeCanonical(out, s)
	if err != nil {
		return nil, err
	}
	return out[:n], nil
}

// decodeCanonicalBase64Keeping is decodeCanonicalBase64 that also returns a
// copy of s, the data's canonical spelling. Both live in one buffer — for
// an output chunk of about the recommended size, a pooled one, returned
// with pooled (see Chunk.Release); data's capacity ends where the text
// begins.
func decodeCanonicalBase64Keeping(s []byte) (data, text []byte, pooled *chunkBuf, err error) {
	if canonicalLen(s) < 0 {
		return nil, nil, nil, errNotCanonicalBase64
	}
	room := b64.DecodedLen(len(s))
	var buf []byte
	need := room + len(s)
	if pool := chunkPoolFor(need); pool != nil {
		pooled = pool.Get().(*chunkBuf)
		buf = pooled.b[:need]
	} else {
		buf = make([]byte, need)
	}
	n, err := decodeCanonical(buf[:room], s)
	if err != nil {
		pooled.release()
		return nil, nil, nil, err
	}
	text = buf[room:]
	copy(text, s)
	return buf[:n:n], text, pooled, nil
}

// The memory of output chunks is pooled for chunks of about the
// recommended 64 KiB (§4) and of about four times it (an executor may send
// chunks as large as its frames allow; ours sends 256 KiB): decoded and
// base64 text that is 150 KB, or 600 KB, and a stream is thousands of them
// a second, whose fresh allocations (zeroed, then collected) cost the lane
// a fifth of its CPU per streamed byte. Any other chunk gets memory of its
// own size, so a buffer is never more than its class's cap/min times what
// it holds.
const (
	pooledChunkCap = 160 << 10
	minPooledChunk = 96 << 10

	pooledLargeChunkCap = 4 * pooledChunkCap
	minPooledLargeChunk = 4 * minPooledChunk
)

type chunkBuf struct {
	b    []byte
	pool *sync.Pool
}

var (
	chunkBufs      = sync.Pool{}
	largeChunkBufs = sync.Pool{}
)

func init() {
	chunkBufs.New = func() any { return &chunkBuf{b: make([]byte, pooledChunkCap), pool: &chunkBufs} }
	largeChunkBufs.New = func() any { return &chunkBuf{b: make([]byte, pooledLargeChunkCap), pool: &largeChunkBufs} }
}

// chunkPoolFor is the pool for a buffer of need bytes; nil: none.
func chunkPoolFor(need int) *sync.Pool {
	switch {
	case need >= minPooledChunk && need <= pooledChunkCap:
		return &chunkBufs
	case need >= minPooledLargeChunk && need <= pooledLargeChunkCap:
		return &largeChunkBufs
	}
	return nil
}

func (c *chunkBuf) release() {
	if c != nil {
		c.pool.Put(c)
	}
}

// CanonicalBase64 reports whether s is canonical standard base64: the one
// spelling base64.StdEncoding produces for its bytes.
func CanonicalBase64(s string) bool {
	_, err := decodeCanonicalBase64([]byte(s))
	return err == nil
}

// DecodeCanonicalBase64 decodes s if it is canonical standard base64, else
// it returns an error saying what canonical means.
func DecodeCanonicalBase64(s string) ([]byte, error) {
	return decodeCanonicalBase64([]byte(s))
}

// DecodeCanonicalBase64Bytes is DecodeCanonicalBase64 for bytes, without
// copying them first: the only allocation is the decoded result.
func DecodeCanonicalBase64Bytes(b []byte) ([]byte, error) {
	return decodeCanonicalBase64(b)
}

// AppendDecodeCanonicalBase64 appends the bytes s decodes to onto dst if s
// is canonical standard base64, with DecodeCanonicalBase64's verdicts; on
// an error dst comes back unchanged. A reader that reuses dst decodes
// without allocating.
func AppendDecodeCanonicalBase64(dst, s []byte) ([]byte, error) {
	if canonicalLen(s) < 0 {
		return dst, errNotCanonicalBase64
	}
	room := b64.DecodedLen(len(s))
	if cap(dst)-len(dst) < room {
		grown := make([]byte, len(dst), len(dst)+room)
		copy(grown, dst)
		dst = grown
	}
	n, err := decodeCanonical(dst[len(dst):len(dst)+room], s)
	if err != nil {
		return dst, err
	}
	return dst[:len(dst)+n], nil
}
