package bleadapter

import (
	"context"

	"github.com/sema-agent/sema/nexting"
)

// Host is this host's Bluetooth LE as a transport, for a caller that takes
// one by interface (executor/approve's ble:ADDR targets): ParseAddress,
// whether this build has a stack adapter, and Dial. cmd/ wires it in, so
// that only a program that chooses Bluetooth links it.
type Host struct{}

// ParseAddress is the package's ParseAddress.
func (Host) ParseAddress(s string) (string, error) { return ParseAddress(s) }

// Available is nil where this build has a stack adapter (Supported), else
// ErrUnsupported.
func (Host) Available() error {
	if !Supported {
		return ErrUnsupported
	}
	return nil
}

// Dial is the package's Dial, its Link as a nexting.BLELink.
func (Host) Dial(ctx context.Context, addr string) (nexting.BLELink, error) {
	link, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return link, nil
}
