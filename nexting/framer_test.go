package nexting

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// outcome is a comparable summary of one Result.
type outcome struct {
	frame string
	code  Code
	size  int
}

func (o outcome) String() string {
	if o.code != "" {
		return fmt.Sprintf("error %s size %d", o.code, o.size)
	}
	return fmt.Sprintf("frame %q", o.frame)
}

func summarize(rs []Result) []outcome {
	var out []outcome
	for _, r := range rs {
		if r.Err != nil {
			out = append(out, outcome{code: r.Err.Code, size: r.Err.Size})
			if r.Frame != nil {
				out = append(out, outcome{frame: "BOTH FRAME AND ERROR"})
			}
			continue
		}
		out = append(out, outcome{frame: string(r.Frame)})
	}
	return out
}

// feedChunks feeds stream cut at the given offsets.
func feedChunks(t testing.TB, max int, stream []byte, cuts ...int) []outcome {
	f, err := NewFramer(max)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Result
	prev := 0
	for _, c := range cuts {
		rs = append(rs, f.Feed(stream[prev:c])...)
		prev = c
	}
	rs = append(rs, f.Feed(stream[prev:])...)
	return summarize(rs)
}

const (
	fPresent = `{"v":1,"t":"present","id":"r1","sum":"Allow git push? é😀","opt":["allow","deny"],"ttl":30000}`
	fAnswer  = `{"v":1,"t":"answer","id":"r1","ch":"allow"}`
	fStatus  = `{"v":1,"t":"status","agents":[{"slot":0,"state":"thinking","label":"fix login bug"}]}`
)

type stream struct {
	name string
	max  int
	data string
	want []outcome
}

func framerStreams() []stream {
	long := `{"v":1,"t":"answer","id":"r","ch":"allow","pad":"` + rep("x", 700) + `"}`
	return []stream{
		{"three valid frames", 0, fPresent + "\n" + fAnswer + "\n" + fStatus + "\n",
			[]outcome{{frame: fPresent}, {frame: fAnswer}, {frame: fStatus}}},
		{"invalid UTF-8 then resume", 0, fAnswer + "\n" + `{"v":1,"sum":"` + "ab\xffcd" + `"}` + "\n" + fStatus + "\n",
			[]outcome{{frame: fAnswer}, {code: CodeBadMessage, size: 17}, {frame: fStatus}}},
		{"sequence cut by LF", 0, "\"\xe2\x82\n" + fAnswer + "\n",
			[]outcome{{code: CodeBadMessage, size: 2}, {frame: fAnswer}}},
		{"empty lines", 0, "\n" + fAnswer + "\n\n",
			[]outcome{{frame: ""}, {frame: fAnswer}, {frame: ""}}},
		{"oversize then resume", 512, fAnswer + "\n" + long + "\n" + fPresent + "\n",
			[]outcome{{frame: fAnswer}, {code: CodeMessageTooLarge, size: 512}, {frame: fPresent}}},
		{"oversize with invalid UTF-8 past the limit", 512, long[:600] + "\xff" + long[600:] + "\n" + fAnswer + "\n",
			[]outcome{{code: CodeMessageTooLarge, size: 512}, {frame: fAnswer}}},
		{"invalid UTF-8 before the limit of an oversize line", 512, "\xc0" + long + "\n" + fAnswer + "\n",
			[]outcome{{code: CodeBadMessage, size: 1}, {frame: fAnswer}}},
		{"exactly at the limit", 512, long[:511] + "\n" + long[:512] + "\n" + fAnswer,
			[]outcome{{frame: long[:511]}, {code: CodeMessageTooLarge, size: 512}}},
		{"unterminated tail stays buffered", 0, fAnswer + "\n" + fStatus[:20],
			[]outcome{{frame: fAnswer}}},
		{"multibyte runes everywhere", 0, rep("é😀\u2028", 30) + "\n" + fPresent + "\n",
			[]outcome{{frame: rep("é😀\u2028", 30)}, {frame: fPresent}}},
	}
}

// TestFramerSplitAtEveryOffset: a stream cut into two chunks at every byte
// offset, into single bytes, and into random chunks yields exactly what the
// whole stream yields.
func TestFramerSplitAtEveryOffset(t *testing.T) {
	for _, s := range framerStreams() {
		t.Run(s.name, func(t *testing.T) {
			data := []byte(s.data)
			whole := feedChunks(t, s.max, data)
			if fmt.Sprint(whole) != fmt.Sprint(s.want) {
				t.Fatalf("whole stream\n got %v\nwant %v", whole, s.want)
			}
			for i := 0; i <= len(data); i++ {
				if got := feedChunks(t, s.max, data, i); fmt.Sprint(got) != fmt.Sprint(s.want) {
					t.Fatalf("split at %d\n got %v\nwant %v", i, got, s.want)
				}
			}
			every := make([]int, len(data))
			for i := range every {
				every[i] = i
			}
			if got := feedChunks(t, s.max, data, every...); fmt.Sprint(got) != fmt.Sprint(s.want) {
				t.Fatalf("byte at a time\n got %v\nwant %v", got, s.want)
			}
			r := rand.New(rand.NewPCG(uint64(len(data)), 7))
			for range 200 {
				var cuts []int
				for c := r.IntN(20); c < len(data); c += 1 + r.IntN(40) {
					cuts = append(cuts, c)
				}
				if got := feedChunks(t, s.max, data, cuts...); fmt.Sprint(got) != fmt.Sprint(s.want) {
					t.Fatalf("cuts %v\n got %v\nwant %v", cuts, got, s.want)
				}
			}
		})
	}
}

// TestFramerSplitAtEveryPair cuts a short multi-frame stream at every pair
// of offsets (three chunks).
func TestFramerSplitAtEveryPair(t *testing.T) {
	data := []byte(fAnswer + "\n" + "\xe2\x82\xac\n" + `{"v":1,"t":"usage_clear"}` + "\n")
	want := feedChunks(t, 0, data)
	if len(want) != 3 {
		t.Fatalf("got %v", want)
	}
	for i := 0; i <= len(data); i++ {
		for j := i; j <= len(data); j++ {
			if got := feedChunks(t, 0, data, i, j); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("cuts %d,%d\n got %v\nwant %v", i, j, got, want)
			}
		}
	}
}

func TestFramerReset(t *testing.T) {
	f, _ := NewFramer(0)
	if rs := f.Feed([]byte(fStatus[:30])); len(rs) != 0 {
		t.Fatalf("partial frame yielded %v", summarize(rs))
	}
	f.Reset() // disconnect: the fragment must not prefix the next frame
	got := summarize(f.Feed([]byte(fAnswer + "\n")))
	if fmt.Sprint(got) != fmt.Sprint([]outcome{{frame: fAnswer}}) {
		t.Fatalf("after Reset: %v", got)
	}
	// Reset also ends a discard in progress.
	f2, _ := NewFramer(512)
	f2.Feed([]byte(rep("x", 600)))
	f2.Reset()
	got = summarize(f2.Feed([]byte(fAnswer + "\n")))
	if fmt.Sprint(got) != fmt.Sprint([]outcome{{frame: fAnswer}}) {
		t.Fatalf("after Reset during discard: %v", got)
	}
	// Reset during an incomplete UTF-8 sequence.
	f3, _ := NewFramer(0)
	f3.Feed([]byte("\xe2\x82"))
	f3.Reset()
	if got := summarize(f3.Feed([]byte("\xac\n"))); len(got) != 1 || got[0].code != CodeBadMessage {
		t.Fatalf("continuation byte after Reset: %v", got)
	}
}

// TestFramerOversizeReportedOnce: a long line yields one error however it
// is chunked, and nothing is buffered beyond the limit.
func TestFramerOversizeReportedOnce(t *testing.T) {
	f, _ := NewFramer(512)
	var rs []Result
	for range 100 {
		rs = append(rs, f.Feed(bytes.Repeat([]byte("y"), 1000))...)
	}
	if len(rs) != 1 || rs[0].Err.Code != CodeMessageTooLarge {
		t.Fatalf("got %v", summarize(rs))
	}
	if cap(f.buf) > 512 {
		t.Errorf("buffer grew to %d", cap(f.buf))
	}
	rs = f.Feed([]byte("\n" + fAnswer + "\n"))
	if got := summarize(rs); fmt.Sprint(got) != fmt.Sprint([]outcome{{frame: fAnswer}}) {
		t.Fatalf("after the LF: %v", got)
	}
}

func TestFramerFramesAreCopies(t *testing.T) {
	f, _ := NewFramer(0)
	chunk := []byte(fAnswer + "\n" + fAnswer + "\n")
	rs := f.Feed(chunk)
	copy(chunk, bytes.Repeat([]byte("z"), len(chunk)))
	f.Feed([]byte(fStatus + "\n"))
	for _, r := range rs {
		if string(r.Frame) != fAnswer {
			t.Fatalf("frame changed under the caller: %q", r.Frame)
		}
	}
}

func TestNewFramerLimits(t *testing.T) {
	for _, n := range []int{-1, 1, 511, 4097} {
		if _, err := NewFramer(n); err == nil {
			t.Errorf("NewFramer(%d) accepted", n)
		}
	}
	for _, n := range []int{0, 512, 4096} {
		if _, err := NewFramer(n); err != nil {
			t.Errorf("NewFramer(%d): %v", n, err)
		}
	}
	var zero Framer // the zero Framer works with the default limit
	if got := summarize(zero.Feed([]byte(fAnswer + "\n"))); len(got) != 1 || got[0].frame != fAnswer {
		t.Fatalf("zero Framer: %v", got)
	}
}

// TestFramerThenDecode: frames from the framer decode; only whole frames
// are ever decoded, so a cut frame never produces a message.
func TestFramerThenDecode(t *testing.T) {
	stream := fPresent + "\n" + fAnswer + "\n" + fStatus + "\n"
	for i := 0; i < len(stream); i++ {
		f, _ := NewFramer(0)
		var types []string
		for _, chunk := range []string{stream[:i], stream[i:]} {
			for _, r := range f.Feed([]byte(chunk)) {
				m, err := Decode(r.Frame)
				if err != nil {
					t.Fatalf("split %d: %v", i, err)
				}
				types = append(types, string(m.Type()))
			}
		}
		if strings.Join(types, ",") != "present,answer,status" {
			t.Fatalf("split %d: %v", i, types)
		}
	}
}
