package mcp

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// writeSplit writes data to c in pieces of the sizes given, cycling.
func writeSplit(c *capture, data []byte, sizes []int) {
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(max(sizes[i%len(sizes)], 1), len(data))
		}
		c.write(data[:n])
		data = data[n:]
	}
}

func TestCaptureKeepsEverythingUnderTheCap(t *testing.T) {
	for _, n := range []int{0, 1, 511, 1024} {
		c := newCapture(1024)
		data := bytes.Repeat([]byte{'a'}, n)
		writeSplit(c, data, []int{7})
		if got := c.text("stdout"); got != string(data) || c.leftOut() != 0 {
			t.Errorf("n=%d: text %d bytes, left out %d", n, len(got), c.leftOut())
		}
	}
}

func TestCaptureKeepsTheHeadAndTheTailAndCountsTheRest(t *testing.T) {
	for _, sizes := range [][]int{{1}, {3, 700}, {100000}, {511, 512, 513}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			var data []byte
			for i := range 10000 {
				data = fmt.Appendf(data, "%05d\n", i)
			}
			c := newCapture(1024)
			writeSplit(c, data, sizes)
			// The kept 512 bytes of the tail start 2 bytes before a line:
			// the tail shown starts at that line.
			head, tail := string(data[:512]), string(data[len(data)-510:])
			marker := fmt.Sprintf("\n[… %d bytes of stdout left out: %d in all …]\n", len(data)-1022, len(data))
			if got := c.text("stdout"); got != head+marker+tail {
				t.Fatalf("text:\n%.100q …\n%.100q", got, got[len(got)-100:])
			}
			if c.leftOut() != int64(len(data)-1022) || c.total != int64(len(data)) {
				t.Fatalf("left out %d, total %d", c.leftOut(), c.total)
			}
		})
	}
}

// A cut never splits a character: the bytes of a character cut in two
// count as left out, and the text stays valid UTF-8.
func TestCaptureNeverSplitsACharacter(t *testing.T) {
	data := []byte(strings.Repeat("é", 5000)) // 2 bytes each
	c := newCapture(1025)                     // head 512, tail 513: the tail starts mid-character
	writeSplit(c, data, []int{3})
	got := c.text("stdout")
	if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) {
		t.Fatalf("invalid or replaced text around the cut")
	}
	head, tail, _ := strings.Cut(got, "\n[")
	_, tail, _ = strings.Cut(tail, "]\n")
	if int64(len(head)+len(tail))+c.leftOut() != int64(len(data)) {
		t.Fatalf("kept %d + left out %d != %d", len(head)+len(tail), c.leftOut(), len(data))
	}
}

// The tail starts at a line when one starts within its first lineSeek
// bytes; a tail that already starts a line loses nothing; a tail with no
// line start near its front keeps every byte it can.
func TestCaptureTailStartsAtALine(t *testing.T) {
	lines := func(width, n int) []byte {
		var data []byte
		for i := range n {
			data = fmt.Appendf(data, "%0*d\n", width-1, i)
		}
		return data
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		wantTail int // bytes of the data's end the tail shows
	}{
		{"mid-line", lines(6, 10000), 510},
		{"at a line", lines(8, 10000), 512},
		{"no line near", append(lines(6, 100), bytes.Repeat([]byte{'x'}, 20000)...), 512},
		// 8192 kept, the last line starts 2192 bytes in: within lineSeek.
		{"a line far in", append(bytes.Repeat([]byte{'x'}, 20000), lines(6000, 2)...), 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, piece := range []int{1, 7, 100000} {
				limit := 1024
				if tc.wantTail > 512 {
					limit = 2 * 8192
				}
				c := newCapture(limit)
				writeSplit(c, tc.data, []int{piece})
				_, tail, _ := strings.Cut(c.text("stdout"), "in all …]\n")
				want := string(tc.data[len(tc.data)-tc.wantTail:])
				if tail != want {
					t.Fatalf("piece %d: tail %d bytes %.20q…, want %d bytes %.20q…", piece, len(tail), tail, len(want), want)
				}
			}
		})
	}
}

func FuzzCaptureAccountsForEveryByte(f *testing.F) {
	f.Add([]byte("hello world"), 4, 3)
	f.Add(bytes.Repeat([]byte("ab\xffé"), 999), 1100, 17)
	f.Fuzz(func(t *testing.T, data []byte, limit, piece int) {
		limit = minMaxOutput + abs(limit)%4096
		c := newCapture(limit)
		writeSplit(c, data, []int{abs(piece)%2000 + 1})
		got := c.text("stdout")
		if !utf8.ValidString(got) {
			t.Fatal("text is not valid UTF-8")
		}
		if c.total != int64(len(data)) {
			t.Fatalf("total %d, wrote %d", c.total, len(data))
		}
		if c.leftOut() == 0 {
			if got != strings.ToValidUTF8(string(data), "\uFFFD") {
				t.Fatal("nothing left out, yet the text is not the data")
			}
			return
		}
		if len(data) <= limit {
			t.Fatalf("%d bytes left out of %d under the cap %d", c.leftOut(), len(data), limit)
		}
		if !strings.Contains(got, fmt.Sprintf("[… %d bytes of stdout left out: %d in all …]", c.leftOut(), len(data))) {
			t.Fatal("a cut without its marker")
		}
		if c.leftOut() < int64(len(data)-limit) || c.leftOut() > int64(len(data)-limit+utf8.UTFMax+lineSeek) {
			t.Fatalf("left out %d of %d at cap %d", c.leftOut(), len(data), limit)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
