package executor

import (
	"net"
	"net/http"
	"testing"

	"golang.org/x/sys/unix"
)

// The lane socket carries TCP_USER_TIMEOUT, so a lane host that vanishes
// without a reset is given up after deadPeerTimeout, not after TCP's own
// retransmission limit.
func TestTheLaneSocketGivesUpOnADeadPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			var b [1]byte
			c.Read(b[:]) // until the client goes
		}
	}()
	tr := wsHTTPClient(&http.Client{}).Transport.(*http.Transport)
	c, err := tr.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*coalescingConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	})
	if gerr != nil || got != int(deadPeerTimeout.Milliseconds()) {
		t.Fatalf("TCP_USER_TIMEOUT = %d ms (%v), want %d", got, gerr, deadPeerTimeout.Milliseconds())
	}
}
