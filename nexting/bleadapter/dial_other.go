//go:build !linux

package bleadapter

import "context"

// Supported reports whether this build has a stack adapter. Only Linux
// has one (BlueZ over D-Bus); tinygo.org/x/bluetooth also drives macOS
// (through cgo) and Windows, but no adapter here was written or tried for
// them.
const Supported = false

// Dial checks addr and returns ErrUnsupported: this build has no stack
// adapter.
func Dial(_ context.Context, addr string) (*Link, error) {
	if _, err := ParseAddress(addr); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}
