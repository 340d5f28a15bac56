package lane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// maskedText is a client's WebSocket text frame (RFC 6455 §5.2), masked.
func maskedText(payload string) []byte {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	frame := []byte{0x81, 0x80 | byte(len(payload)), key[0], key[1], key[2], key[3]}
	for i := range len(payload) {
		frame = append(frame, payload[i]^key[i%4])
	}
	return frame
}

// A client may send its first frame in the same packet as its upgrade
// request, so that net/http has read it into its own buffer before the
// upgrade: the socket, now on buffers of its own, still reads it first.
// Here it is malformed, which closes the socket before any deadline (the
// clock is fake and never moves).
func TestAFramePipelinedWithTheUpgradeIsRead(t *testing.T) {
	l := newWSLane(t)
	raw, err := net.Dial("tcp", strings.TrimPrefix(l.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	req := "GET " + l.srv.cfg.WSPath + " HTTP/1.1\r\nHost: lane\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := raw.Write(append([]byte(req), maskedText("not json")...)); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(30 * time.Second)) // a backstop, not a measure
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %v, %v", resp, err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the lane never closed the socket after the pipelined frame: %v", err)
	}
	eventually(t, "the malformed frame was audited", func() bool {
		return len(l.auditReasons(string(EventFrameRejected), "")) == 1
	})
}
