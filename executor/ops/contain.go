//go:build linux

package ops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// This file answers "where does this path really lead", and refuses what
// leads outside Env.AllowedRoots (§6.6). The answer comes from the kernel,
// not from string processing: an op opens the object (O_PATH for anything
// that must not have side effects), then asks the kernel for the real path
// of the open descriptor (/proc/self/fd/N) and checks that. The check is
// therefore about the object the op then works on, not about a path that
// might be swapped in between. Nothing is resolved against another base and
// ~ is never expanded: paths arrive absolute and normalized (§3.1), and
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

// realPathFD returns the real path of the object open as fd: the kernel's
// own answer through /proc/self/fd, checked against the object's identity,
// so that a path which names something else by now is never reported. When
// /proc is not mounted it falls back to resolving hint (an absolute path
// that led to the object) with filepath.EvalSymlinks, under the same check.
func realPathFD(fd int, hint string) (string, error) {
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return "", err
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		if _, statErr := os.Stat("/proc/self/fd"); statErr == nil {
			return "", err
		}
		if p, err = filepath.EvalSymlinks(hint); err != nil {
			return "", err
		}
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("the kernel reports %q, which is not reachable from this process's root", p)
	}
	var got unix.Stat_t
	if err := unix.Lstat(p, &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		return "", errMoved
	}
	return p, nil
}

// openParent opens the directory holding p's final name, following
// symlinks in the parent path, as an O_PATH descriptor, and returns it with
// the final name. The caller closes dfd.
func openParent(p string) (dfd int, name string, err error) {
	dir, name := splitPath(p)
	dfd, err = openFD(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return dfd, name, nil
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
		fd, err := openFD(unix.AT_FDCWD, d, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == nil {
			real, err := realPathFD(fd, d)
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
