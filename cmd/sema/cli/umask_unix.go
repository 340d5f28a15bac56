//go:build unix

package cli

import (
	"io/fs"
	"syscall"
)

// umask reads the process's umask (setting it back at once).
func umask() fs.FileMode {
	m := syscall.Umask(0o022)
	syscall.Umask(m)
	return fs.FileMode(m) & fs.ModePerm
}
