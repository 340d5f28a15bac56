package nexting

import (
	"bytes"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzBLEChunking: any chunking of a valid frame stream yields exactly its
// frames. pick chooses the frames (each byte one published vector frame),
// plan the chunk sizes (each byte 1–256, cycling).
func FuzzBLEChunking(f *testing.F) {
	frames := validStream(f)
	f.Add([]byte{0, 1, 2, 3}, []byte{19})
	f.Add([]byte{5, 5, 5}, []byte{0})
	f.Add([]byte{7, 30, 2}, []byte{181, 243, 255, 0, 1})
	f.Fuzz(func(t *testing.T, pick, plan []byte) {
		if len(pick) > 64 {
			pick = pick[:64]
		}
		var stream []byte
		var want []string
		for _, p := range pick {
			fr := frames[int(p)%len(frames)]
			stream = append(stream, fr...)
			want = append(want, string(fr))
		}
		re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
		var rs []Result
		for i := 0; len(stream) > 0; i++ {
			n := len(stream)
			if len(plan) > 0 {
				n = min(int(plan[i%len(plan)])+1, n)
			}
			rs = append(rs, re.Chunk(stream[:n])...)
			stream = stream[n:]
		}
		got, codes := frameStrings(rs)
		if len(codes) != 0 || !slices.Equal(got, want) {
			t.Fatalf("got %d frames (errors %v), want %d", len(got), codes, len(want))
		}
	})
}

// FuzzBLEReassembler: arbitrary bytes, chunked arbitrarily, with losses
// and disconnects, never panic and only ever yield well-formed Results;
// without losses and disconnects the outcome is the one of the whole
// stream fed at once. Each plan byte b is a chunk of (b&0x3f)+1 bytes,
// preceded by a loss when b>>6 == 3 and by a disconnect when b>>6 == 2.
func FuzzBLEReassembler(f *testing.F) {
	for _, s := range framerStreams() {
		f.Add([]byte(s.data), []byte{19, 0, 63})
	}
	f.Add([]byte(fAnswer+"\n"+fPresent+"\n"), []byte{0xc0 | 5, 19, 0x80 | 3, 63})
	f.Fuzz(func(t *testing.T, data, plan []byte) {
		const max = 512
		re := NewBLEReassembler(&Framer{max: max})
		var rs []Result
		faults := false
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(plan) > 0 {
				b := plan[i%len(plan)]
				switch b >> 6 {
				case 3:
					rs = append(rs, re.Lost()...)
					faults = true
				case 2:
					re.Disconnect()
					faults = true
				}
				n = min(int(b&0x3f)+1, n)
			}
			rs = append(rs, re.Chunk(rest[:n])...)
			rest = rest[n:]
		}
		for _, r := range rs {
			if (r.Err == nil) == (r.Frame == nil) {
				t.Fatalf("result with both or neither: %+v", r)
			}
			if r.Err == nil && (len(r.Frame) > max-1 || bytes.IndexByte(r.Frame, '\n') >= 0 || !utf8.Valid(r.Frame)) {
				t.Fatalf("bad frame %q", r.Frame)
			}
			if r.Err != nil && !r.Err.Code.Valid() {
				t.Fatalf("bad error %v", r.Err)
			}
		}
		if faults {
			return
		}
		whole := &Framer{max: max}
		if got, want := summarize(rs), summarize(whole.Feed(data)); !slices.Equal(got, want) {
			t.Fatalf("chunked %v\nwhole   %v", got, want)
		}
	})
}
