package nexting

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// Framer is the receiving line decoder of one byte stream (one direction of
// one connection). Feed it transport chunks as they arrive — a radio
// packet, a socket read — split at any byte offset; it yields each complete
// frame (the JSON object without its LF, ready for Decode) or a framing
// error. It never yields part of a frame, so nothing can act on a partial
// message (short spec §1, profiles sheet "Framing"):
//
//   - A frame is at most max bytes including its LF. When the max-th byte
//     of a frame is not its LF, Feed reports message_too_large once, clears
//     the frame and discards input up to and including the next LF.
//   - Invalid UTF-8 (checked incrementally, a sequence may straddle chunks;
//     a sequence cut short by the LF is invalid) is reported as bad_message
//     as soon as it is seen; the frame is cleared and input is discarded up
//     to and including the next LF.
//   - Reset clears the frame on disconnect; decoding starts afresh.
//
// An empty line yields an empty frame, which Decode refuses. A Framer is
// not safe for concurrent use; give each stream its own, so fragments of
// two streams can never interleave in one frame.
type Framer struct {
	max        int
	buf        []byte // the current frame, LF excluded
	checked    int    // buf[:checked] is complete, valid UTF-8
	discarding bool   // skipping to the next LF after an error
}

// Result is one outcome of Feed: either a complete frame or a framing
// error.
type Result struct {
	Frame []byte // the JSON object without its LF; a fresh copy the caller may keep
	Err   *Error // message_too_large or bad_message (invalid UTF-8)
}

// NewFramer returns a Framer for frames of at most maxBytes including the
// LF. maxBytes must be within MinFrameBytes…MaxFrameBytes; 0 means
// MaxFrameBytes. Negotiated.NewFramer passes the negotiated limit.
func NewFramer(maxBytes int) (*Framer, error) {
	if maxBytes == 0 {
		maxBytes = MaxFrameBytes
	}
	if maxBytes < MinFrameBytes || maxBytes > MaxFrameBytes {
		return nil, fmt.Errorf("nexting: frame limit %d outside %d-%d", maxBytes, MinFrameBytes, MaxFrameBytes)
	}
	return &Framer{max: maxBytes, buf: make([]byte, 0, 256)}, nil
}

// Max is the frame limit, LF included.
func (f *Framer) Max() int { return f.max }

// Reset clears the current frame and any discard in progress (disconnect).
func (f *Framer) Reset() {
	f.buf = f.buf[:0]
	f.checked = 0
	f.discarding = false
}

// Feed consumes one transport chunk and returns, in stream order, every
// frame it completed and every framing error it detected. Bytes after the
// last LF stay buffered for the next call.
func (f *Framer) Feed(chunk []byte) []Result {
	if f.max == 0 { // the zero Framer uses the default limit
		f.max = MaxFrameBytes
	}
	var out []Result
	for len(chunk) > 0 {
		lf := bytes.IndexByte(chunk, '\n')
		seg := chunk
		if lf >= 0 {
			seg = chunk[:lf]
			chunk = chunk[lf+1:]
		} else {
			chunk = nil
		}
		if f.discarding {
			f.discarding = lf < 0
			continue
		}
		// The frame's content may hold max-1 bytes; its LF is the max-th.
		room := f.max - 1 - len(f.buf)
		over := len(seg) > room
		if over {
			seg = seg[:room]
		}
		f.buf = append(f.buf, seg...)
		if bad := f.checkUTF8(lf >= 0 && !over); bad >= 0 {
			// Size counts the frame's bytes up to the start of the invalid
			// sequence, so it does not depend on how the input was chunked.
			out = append(out, f.fail(badMessage("", "invalid UTF-8"), bad+1, lf >= 0))
			continue
		}
		if over {
			out = append(out, f.fail(tooLarge(f.max, f.max), f.max, lf >= 0))
			continue
		}
		if lf >= 0 {
			out = append(out, Result{Frame: append([]byte{}, f.buf...)})
			f.buf = f.buf[:0]
			f.checked = 0
		}
	}
	return out
}

// fail clears the frame and, unless the error's LF was already seen,
// discards up to the next LF.
func (f *Framer) fail(e *Error, size int, sawLF bool) Result {
	e.Size = size
	f.buf = f.buf[:0]
	f.checked = 0
	f.discarding = !sawLF
	return Result{Err: e}
}

// checkUTF8 validates the bytes appended since the last call and returns
// the offset of the first invalid sequence, or -1. A trailing incomplete
// sequence is left for the next chunk, unless the frame is complete
// (final), when it is invalid.
func (f *Framer) checkUTF8(final bool) int {
	b := f.buf
	i := f.checked
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			if !final && !utf8.FullRune(b[i:]) {
				break // a sequence that may still complete
			}
			return i
		}
		i += size
	}
	f.checked = i
	return -1
}
