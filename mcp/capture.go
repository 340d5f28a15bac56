package mcp

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sema-agent/sema/internal/words"
)

// capture keeps a stream's output within a cap without hiding the cut: the
// first half of the cap and the last half, and how many bytes between them
// were left out. The head shows how a command started, the tail how it
// ended (where the error usually is).
type capture struct {
	limit int // the cap; head and tail get half each
	head  []byte
	tail  ring
	total int64
	// beforeTail is the last byte the tail let go of: the one just
	// before the kept tail, once the tail has let go of any.
	beforeTail byte
}

func newCapture(limit int) *capture {
	half := limit / 2
	return &capture{limit: limit, head: make([]byte, 0, min(half, 64<<10)), tail: ring{size: limit - half}}
}

func (c *capture) write(p []byte) {
	c.total += int64(len(p))
	if room := c.limit/2 - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if gone := c.tail.len() + len(p) - c.tail.size; gone > 0 && c.tail.size > 0 {
		if i := gone - 1; i < c.tail.len() {
			c.beforeTail = c.tail.at(i)
		} else {
			c.beforeTail = p[i-c.tail.len()]
		}
	}
	c.tail.write(p)
}

// omitted is how many bytes the capture left out.
func (c *capture) omitted() int64 { return c.total - int64(len(c.head)) - int64(c.tail.len()) }

// text is the kept output as valid UTF-8, with a marker where bytes were
// left out. A cut never splits a character: the head ends and the tail
// starts on a character boundary, and the tail starts at a line when a
// line starts within its first lineSeek bytes (the bytes moved count as
// left out).
func (c *capture) text(stream string) string {
	if c.omitted() == 0 {
		return validUTF8(string(c.head) + string(c.tail.bytes()))
	}
	head, tail := c.cut()
	left := c.total - int64(len(head)) - int64(len(tail))
	var b strings.Builder
	b.WriteString(validUTF8(string(head)))
	fmt.Fprintf(&b, "\n[… %s of %s left out: %d in all …]\n", words.Bytes(left), stream, c.total)
	b.WriteString(validUTF8(string(tail)))
	return b.String()
}

// leftOut is what text() leaves out, for the structured result.
func (c *capture) leftOut() int64 {
	if c.omitted() == 0 {
		return 0
	}
	head, tail := c.cut()
	return c.total - int64(len(head)) - int64(len(tail))
}

// lineSeek is how far into the tail a cut looks for the start of a line.
const lineSeek = 4 << 10

// cut is the head and the tail text() shows once bytes were left out.
func (c *capture) cut() (head, tail []byte) {
	head, tail = trimToRunes(c.head, c.tail.bytes())
	if c.beforeTail == '\n' && len(tail) == c.tail.len() {
		return head, tail // the tail already starts a line
	}
	if i := bytes.IndexByte(tail[:min(len(tail), lineSeek)], '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	return head, tail
}

// trimToRunes drops a character cut in two at the end of head and at the
// start of tail.
func trimToRunes(head, tail []byte) ([]byte, []byte) {
	for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
		r, size := utf8.DecodeLastRune(head)
		if r != utf8.RuneError || size != 1 {
			break
		}
		head = head[:len(head)-1]
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	return head, tail
}

// validUTF8 replaces invalid bytes with U+FFFD, as JSON would.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// ring keeps the last size bytes written to it.
type ring struct {
	size int
	buf  []byte
	next int // where the next byte goes once buf is full
}

func (r *ring) write(p []byte) {
	if r.size == 0 {
		return
	}
	if len(p) >= r.size {
		r.buf = append(r.buf[:0], p[len(p)-r.size:]...)
		r.next = 0
		return
	}
	for len(p) > 0 {
		if len(r.buf) < r.size {
			n := min(r.size-len(r.buf), len(p))
			r.buf = append(r.buf, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(r.buf[r.next:], p)
		r.next = (r.next + n) % r.size
		p = p[n:]
	}
}

func (r *ring) len() int { return len(r.buf) }

// at is the i-th kept byte, in order.
func (r *ring) at(i int) byte {
	if len(r.buf) < r.size {
		return r.buf[i]
	}
	return r.buf[(r.next+i)%r.size]
}

// bytes returns the kept bytes in order.
func (r *ring) bytes() []byte {
	if len(r.buf) < r.size || r.next == 0 {
		return r.buf
	}
	out := make([]byte, 0, r.size)
	return append(append(out, r.buf[r.next:]...), r.buf[:r.next]...)
}
