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
			head, tail := string(data[:512]), string(data[len(data)-512:])
			marker := fmt.Sprintf("\n[… %d bytes of stdout left out: %d in all …]\n", len(data)-1024, len(data))
			if got := c.text("stdout"); got != head+marker+tail {
				t.Fatalf("text:\n%.100q …\n%.100q", got, got[len(got)-100:])
			}
			if c.leftOut() != int64(len(data)-1024) || c.total != int64(len(data)) {
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
		if c.leftOut() < int64(len(data)-limit) || c.leftOut() > int64(len(data)-limit+2*utf8.UTFMax) {
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
