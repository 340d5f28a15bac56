//go:build !linux

package cli

import "io"

// Elsewhere the simulator reads lines and prints one line per change.

func isTerminal(any) bool { return false }

func cbreak(io.Reader) func() { return func() {} }
