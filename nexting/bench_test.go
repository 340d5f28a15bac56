package nexting

import (
	"strings"
	"testing"
	"time"
)

// benchFrames is one valid published frame per message type (LF stripped).
func benchFrames(b *testing.B) [][]byte {
	seen := map[Type]bool{}
	var out [][]byte
	for _, vf := range loadVectors(b) {
		for _, v := range vf.Valid {
			m, err := DecodeFrame([]byte(v.Wire))
			if err != nil || seen[m.Type()] {
				continue
			}
			seen[m.Type()] = true
			out = append(out, []byte(strings.TrimSuffix(v.Wire, "\n")))
		}
	}
	if len(out) != len(Types()) {
		b.Fatalf("%d frames for %d types", len(out), len(Types()))
	}
	return out
}

// BenchmarkDecode: frames decoded per second with full validation (strict
// tokenizing, duplicate/NUL/depth/compactness checks, typed parse and
// bounds), cycling through one frame of each of the 21 types.
func BenchmarkDecode(b *testing.B) {
	frames := benchFrames(b)
	var size int
	for _, f := range frames {
		size += len(f)
	}
	b.SetBytes(int64(size / len(frames)))
	b.ReportAllocs()
	n := 0
	start := time.Now()
	for b.Loop() {
		if _, err := Decode(frames[n%len(frames)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "frames/s")
}

// BenchmarkDecodeAnswer: the hot uplink frame.
func BenchmarkDecodeAnswer(b *testing.B) {
	frame := []byte(fAnswer)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode: canonical encoding with validation, one of each type.
func BenchmarkEncode(b *testing.B) {
	var msgs []Message
	for _, f := range benchFrames(b) {
		m, _ := Decode(f)
		msgs = append(msgs, m)
	}
	b.ReportAllocs()
	buf := make([]byte, 0, MaxFrameBytes)
	n := 0
	for b.Loop() {
		var err error
		if buf, err = AppendEncode(buf[:0], msgs[n%len(msgs)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkFramer: a 3-frame stream fed in 20-byte chunks (a BLE-sized
// packet), frames only, no decoding.
func BenchmarkFramer(b *testing.B) {
	stream := []byte(fPresent + "\n" + fAnswer + "\n" + fStatus + "\n")
	f, _ := NewFramer(0)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < len(stream); i += 20 {
			f.Feed(stream[i:min(i+20, len(stream))])
		}
	}
}
