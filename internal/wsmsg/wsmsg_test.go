package wsmsg

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// pair is a real WebSocket over loopback: the server side writes msgs,
// the client side is returned for reading.
func pair(t *testing.T, limit int64, msgs ...[]byte) *websocket.Conn {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for _, m := range msgs {
			if ws.Write(r.Context(), websocket.MessageText, m) != nil {
				return
			}
		}
		ws.Read(r.Context()) // until the client goes
	}))
	t.Cleanup(hs.Close)
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(limit)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// Messages of every size arrive whole and in order into one reused buffer,
// which grows only when a message does not fit.
func TestReadFillsAReusedBuffer(t *testing.T) {
	sizes := []int{0, 1, 511, 512, 513, 4096, 87 << 10, 3, 300 << 10, 10}
	var msgs [][]byte
	for i, n := range sizes {
		msgs = append(msgs, bytes.Repeat([]byte{byte('a' + i)}, n))
	}
	c := pair(t, 1<<20, msgs...)
	buf := make([]byte, 0, 16)
	for i, want := range msgs {
		before := cap(buf)
		typ, got, err := Read(t.Context(), c, buf)
		if err != nil || typ != websocket.MessageText || !bytes.Equal(got, want) {
			t.Fatalf("message %d (%d bytes): got %d bytes, %v, %v", i, len(want), len(got), typ, err)
		}
		if len(want) <= before && cap(got) != before {
			t.Fatalf("message %d fit in %d bytes but the buffer was replaced", i, before)
		}
		buf = got
	}
}

// The connection's read limit holds: a message over it fails the read.
func TestReadHonoursTheReadLimit(t *testing.T) {
	c := pair(t, 1000, bytes.Repeat([]byte("x"), 1001))
	_, _, err := Read(t.Context(), c, nil)
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("a message over the limit read with %v", err)
	}
	if _, _, err := Read(t.Context(), c, nil); err == nil {
		t.Fatal("the socket read on after an oversized message")
	}
}

func TestPoolGivesEmptyBuffers(t *testing.T) {
	var p Pool
	b := p.Get()
	*b = append(*b, "leftover"...)
	p.Put(b)
	for range 3 {
		if got := p.Get(); len(*got) != 0 {
			t.Fatalf("a pooled buffer came back with %q", *got)
		}
	}
}

// Pool.Read delivers every message whole, in order, each in a pooled
// buffer, and an oversized one fails without a buffer.
func TestPoolReadTakesABufferPerMessage(t *testing.T) {
	msgs := [][]byte{[]byte("hb"), bytes.Repeat([]byte("x"), 87<<10), []byte("{}")}
	c := pair(t, 1<<20, msgs...)
	var p Pool
	for i, want := range msgs {
		typ, b, err := p.Read(t.Context(), c)
		if err != nil || typ != websocket.MessageText || !bytes.Equal(*b, want) {
			t.Fatalf("message %d: %v, %v", i, typ, err)
		}
		p.Put(b)
	}
	big := pair(t, 1024, bytes.Repeat([]byte("y"), 2048))
	if _, b, err := p.Read(t.Context(), big); err == nil || b != nil {
		t.Fatalf("an oversized message read as %v, %v; want an error and no buffer", b, err)
	}
}
