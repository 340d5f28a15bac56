package lane

import (
	"bufio"
	"net"
	"net/http"
)

// The buffers a device socket keeps for its whole life, after the upgrade.
// net/http would leave it 4 KiB to read and 4 KiB to write, which at 15,000
// idle devices is 120 MiB of the lane's memory for frames that are mostly
// heartbeats. A larger frame is read straight into its message buffer, and
// written straight to the socket, past these (bufio does so for anything
// larger than its buffer), so they cost only small frames a copy.
const (
	socketReadBuffer  = 512
	socketWriteBuffer = 1024
)

// smallBuffers is the ResponseWriter the WebSocket upgrade hijacks: its
// Hijack hands the socket over with the small buffers above instead of
// net/http's, which the GC then reclaims with the rest of the HTTP
// connection once the upgrade handler has returned (serveWebSocket runs
// the socket in a goroutine of its own).
type smallBuffers struct {
	http.ResponseWriter
	hj http.Hijacker
}

func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	netConn, brw, err := w.hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Bytes the client sent past its upgrade request, already read into
	// net/http's buffer, are read again first (golang/go#32314).
	var src net.Conn = netConn
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		src = &prefixConn{Conn: netConn, early: append([]byte(nil), early...)}
	}
	return src, bufio.NewReadWriter(bufio.NewReaderSize(src, socketReadBuffer), bufio.NewWriterSize(src, socketWriteBuffer)), nil
}

// prefixConn reads early before the socket.
type prefixConn struct {
	net.Conn
	early []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
