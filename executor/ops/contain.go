//go:build linux || darwin

package ops

import (
	"errors"
	"strings"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// This file answers "where does this path really lead", and refuses what
// leads outside Env.AllowedRoots (§6.6). The answer is about an object held
// open, not about a string: an op opens the directory a path leads to (the
// backend, fsys.go: the kernel's own resolution on Linux, a walk that never
// follows a symlink blindly on darwin), takes that directory's real path
// (/proc/self/fd/N, F_GETPATH, or the path the walk proved), checked to name
// that very directory, joins the final name, and checks that. The op then
// works on the object relative to the descriptor it checked, not on a path
// that might be swapped in between. Nothing is resolved against another base
// and ~ is never expanded: paths arrive absolute and normalized (§3.1), and
// anything else is refused invalid.

// errMoved reports that an object changed place while its real path was read.
var errMoved = errors.New("the object was moved or removed while its real path was being read")

// retry repeats a system call interrupted by a signal.
func ignoringEINTR[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != unix.EINTR {
			return v, err
		}
	}
}

// openat opens name relative to dfd (or absolutely), close-on-exec.
func openFD(dfd int, name string, flags int, mode uint32) (int, error) {
	return ignoringEINTR(func() (int, error) { return unix.Openat(dfd, name, flags|unix.O_CLOEXEC, mode) })
}

// closeFD closes a descriptor this package opened; the error of a close of a
// descriptor nobody wrote through is meaningless.
func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

// splitPath splits an absolute normalized path into its parent directory and
// final name. "/" is its own parent, named ".".
func splitPath(p string) (dir, name string) {
	if p == "/" {
		return "/", "."
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// joinPath joins a real directory path and one name.
func joinPath(dir, name string) string {
	switch {
	case name == ".":
		return dir
	case dir == "/":
		return "/" + name
	}
	return dir + "/" + name
}

// checkAbsent checks a path that could not be opened, so that a failure
// never tells what lies outside the roots or inside the executor's own
// files: its canonical form is the real path of its deepest existing
// ancestor directory joined with the rest. Without roots, an ancestor that
// cannot be resolved leaves the op's own error to stand.
func (pol *policy) checkAbsent(p string) *protocol.Failure {
	rest := ""
	for dir := p; ; {
		d, name := splitPath(dir)
		if name != "." {
			rest = "/" + name + rest
		}
		fd, hint, err := fsys.openDir(unix.AT_FDCWD, "", d)
		if err == nil {
			real, err := fsys.realPath(fd, hint)
			closeFD(fd)
			if err != nil {
				if !pol.hasRoots() {
					return nil
				}
				f := osFailure("resolve", d, err)
				return &f
			}
			return pol.check(p, strings.TrimSuffix(real, "/")+rest)
		}
		if d == "/" {
			if !pol.hasRoots() {
				return nil
			}
			f := osFailure("resolve", d, err)
			return &f
		}
		dir = d
	}
}

// osFail is osFailure behind the containment policy: a path outside every
// root, or inside the executor's own files, is refused as such, whatever
// the OS said about it.
func (pol *policy) osFail(verb, p string, err error) protocol.Failure {
	if f := pol.checkAbsent(p); f != nil {
		return *f
	}
	return osFailure(verb, p, err)
}

// unixID is the identity in a stat result.
func unixID(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} }
