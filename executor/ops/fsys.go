//go:build linux || darwin

package ops

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// This file is the seam between the file operations and the platform.
// Everything above it — the walk, containment, staging, verification, the
// renames — is one implementation for Linux and darwin; a backend holds only
// the few system calls the platforms do differently:
//
//	fsys_linux.go     linuxFS: O_PATH opens resolved by the kernel, real
//	                  paths from /proc/self/fd, renameat2(RENAME_NOREPLACE),
//	                  O_TMPFILE, sync_file_range, the umask from /proc
//	fsys_portable.go  portableFS: a descriptor-relative walk (walk.go), real
//	                  paths the walk proved, link(2) for create-if-absent;
//	                  what darwin runs, and what the Linux tests run as well
//	fsys_darwin.go    darwin's wrappers on portableFS: O_SEARCH,
//	                  O_NOFOLLOW_ANY, fcntl(F_GETPATH), renameatx_np
//	                  (RENAME_EXCL), F_FULLFSYNC
//
// docs/fs-ops.md tabulates every kind against the primitive each backend uses.

// backend is what differs between platforms under the file operations.
type backend interface {
	// name names the backend in test output and docs.
	name() string
	// dirFlags are the flags a directory is held open with for walking and
	// for *at calls: no read permission needed (O_PATH, O_SEARCH) where the
	// platform has that.
	dirFlags() int
	// openDir opens the directory name leads to, following every symlink:
	// an absolute name from "/", a relative one from the open directory at,
	// whose hint (from an earlier openDir) is atHint. The returned hint is
	// what realPath needs to answer for fd.
	openDir(at int, atHint, name string) (fd int, hint string, err error)
	// realPath returns the real path of the directory open as fd, checked to
	// name that very directory now (errMoved when it does not).
	realPath(fd int, hint string) (string, error)
	// renameNoReplace renames from to to within dfd only if to does not
	// exist, atomically: EEXIST when it does, an error wrapping
	// errNoAtomicCreate when the filesystem cannot do this atomically.
	renameNoReplace(dfd int, from, to string) error
	// sync makes what was written through fd durable, as far as the
	// platform can promise it (fsync; F_FULLFSYNC on darwin).
	sync(fd int) error
	// tmpFile opens a new unnamed file in dir, or fails errNoTmpFile.
	tmpFile(dir string) (int, error)
	// writeback starts writing n staged bytes at off to disk without
	// waiting; only a speed-up, so it reports nothing.
	writeback(fd int, off, n int64)
	// umask is the process's file mode creation mask.
	umask() uint32
}

// fsys is the backend every op runs on: the platform's own. Only a test
// changes it, between runs of the whole suite (TestMain).
var fsys = nativeBackend()

// errNoTmpFile: the platform or filesystem cannot create an unnamed file.
var errNoTmpFile = errors.New("no unnamed temporary files here")

// errNoAtomicCreate: the filesystem supports neither an exclusive rename
// nor link(2).
var errNoAtomicCreate = errors.New("the filesystem supports neither an exclusive rename (renameat2 RENAME_NOREPLACE, renameatx_np RENAME_EXCL) nor link(2), so a create-if-absent cannot be atomic here")

// linkNoReplace is the create-if-absent every platform has: link(2), which
// never replaces, then unlinking the old name. A filesystem without hard
// links refuses with EPERM or EOPNOTSUPP (ENOTSUP on darwin).
func linkNoReplace(dfd int, from, to string) error {
	_, err := ignoringEINTR(func() (struct{}, error) { return struct{}{}, unix.Linkat(dfd, from, dfd, to, 0) })
	switch {
	case err == nil:
		_ = unix.Unlinkat(dfd, from, 0)
		return nil
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTSUP):
		return fmt.Errorf("%w (link: %v)", errNoAtomicCreate, err)
	}
	return err
}

// sameObject checks that the path real (which must be absolute) names, now,
// the object open as fd: statPath gives its identity. A path that names
// something else by now is never reported as fd's.
func sameObject(fd int, real string, statPath func(string, *unix.Stat_t) error) error {
	var want, got unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return err
	}
	if len(real) == 0 || real[0] != '/' {
		return fmt.Errorf("the path %q is not reachable from this process's root", real)
	}
	if err := statPath(real, &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		return errMoved
	}
	return nil
}

// umaskAtStart is the umask when the package was initialized: umask(2) can
// only be read by setting it, which would race with any goroutine creating
// files, so it is read once, before any op runs, and put back at once.
var umaskAtStart = func() uint32 {
	old := unix.Umask(0o022)
	unix.Umask(old)
	return uint32(old)
}()
