//go:build unix && !linux

package approve

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeer accepts a socket file owned by this user or root (there is no
// portable SO_PEERCRED; this checks the file, not the process).
func checkPeer(_ *net.UnixConn, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("cannot tell who owns %s", path)
	}
	if uid := os.Getuid(); int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("the socket is owned by uid %d, not by this user (%d) or root; refusing it as an approval device", st.Uid, uid)
	}
	return nil
}
