package executor

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setDeadPeerTimeout makes the kernel end a TCP connection whose peer has
// left data unacknowledged for d (TCP_USER_TIMEOUT). The lane sends
// nothing while idle, but the executor's heartbeats go out every H; if the
// lane's host dies or the path to it is cut without a reset, they stay
// unacknowledged and the socket fails after d, so the executor reconnects
// instead of writing into a dead connection for the ~15 minutes of
// TCP's own retransmission limit. It applies to keepalive probes too.
// Other connections (a test's pipe) are left as they are.
func setDeadPeerTimeout(c net.Conn, d time.Duration) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
