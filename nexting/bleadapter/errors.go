package bleadapter

import (
	"errors"
	"runtime"
)

// ErrNoAdapter is the cause of a Dial that found no usable Bluetooth
// controller: no system D-Bus, no BlueZ daemon on it, or no adapter hci0.
// The error wrapping it says which.
var ErrNoAdapter = errors.New("no Bluetooth adapter")

// ErrUnsupported is what Dial returns in a build without a stack adapter
// (Supported is false): every platform but Linux.
var ErrUnsupported = errors.New("Bluetooth LE is supported on Linux (BlueZ) only, not on " + runtime.GOOS)
