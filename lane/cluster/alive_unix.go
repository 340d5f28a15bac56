//go:build unix

package cluster

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// alive reports whether the holder has left a kept connection open and
// silent: a peek that does not wait finds nothing to read. End of file
// (the holder closed it) or bytes nobody asked for mean it is not.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = errors.Is(perr, unix.EAGAIN) || errors.Is(perr, unix.EWOULDBLOCK)
		return true
	})
	return err == nil && open
}
