package approve

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// checkPeer asks the kernel who holds the other end of the socket
// (SO_PEERCRED) and accepts only this user or root.
func checkPeer(c *net.UnixConn, _ string) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("reading the peer's credentials: %w", serr)
	}
	if uid := os.Getuid(); int(cred.Uid) != uid && cred.Uid != 0 {
		return fmt.Errorf("the process listening on the socket runs as uid %d, not as this user (%d) or root; refusing it as an approval device", cred.Uid, uid)
	}
	return nil
}
