//go:build !linux

package executor

import (
	"net"
	"time"
)

// setDeadPeerTimeout is Linux's TCP_USER_TIMEOUT (deadpeer_linux.go);
// elsewhere a dead lane is noticed when TCP's own retransmissions give up.
func setDeadPeerTimeout(net.Conn, time.Duration) error { return nil }
