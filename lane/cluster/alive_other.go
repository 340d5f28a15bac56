//go:build !unix

package cluster

import "net"

// alive cannot peek here: a kept connection is taken as open, and one the
// holder closed fails its exchange (answered as may-have-run).
func alive(net.Conn) bool { return true }
