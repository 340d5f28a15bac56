package ops

import (
	"bytes"
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// darwinFS is darwin's backend: the portable walk (walk.go) with darwin's
// own primitives where it has them. Everything here is a thin wrapper of
// one system call; the logic around it is portableFS's, which the Linux
// tests run too.
type darwinFS struct{ portableFS }

func nativeBackend() backend {
	return darwinFS{portableFS{flags: dirSearch, statPath: statNoSymlinks}}
}

// portableBackend: on darwin the native backend is the portable one.
func portableBackend() backend { return nativeBackend() }

func (darwinFS) name() string { return "darwin" }

// dirSearch are the flags directories are held with.
var dirSearch = searchFlags()

// searchFlags holds directories O_SEARCH (search permission only, like
// Linux's O_PATH), or O_RDONLY|O_DIRECTORY on a kernel that refuses it.
func searchFlags() int {
	fd, err := openFD(unix.AT_FDCWD, "/", unix.O_SEARCH, 0)
	if err != nil {
		return unix.O_RDONLY | unix.O_DIRECTORY
	}
	closeFD(fd)
	return unix.O_SEARCH
}

// statNoSymlinks is the identity of the directory at an absolute path
// through a lookup that fails on any symlink on the way (O_NOFOLLOW_ANY),
// so that a real path that passes the check has none; lstat where the
// kernel lacks the flag, or the directory cannot be opened without read
// permission (no O_SEARCH).
func statNoSymlinks(p string, st *unix.Stat_t) error {
	fd, err := openFD(unix.AT_FDCWD, p, dirSearch|unix.O_NOFOLLOW_ANY, 0)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EACCES) {
		return unix.Lstat(p, st)
	}
	if err != nil {
		return err
	}
	defer closeFD(fd)
	return unix.Fstat(fd, st)
}

// realPath asks the kernel, fcntl(F_GETPATH), for where the directory fd
// is, checked against its identity; the path the walk proved, under the
// same check, when that fails.
func (d darwinFS) realPath(fd int, hint string) (string, error) {
	if p, err := fdPath(fd); err == nil && sameObject(fd, p, d.statPath) == nil {
		return p, nil
	}
	return d.portableFS.realPath(fd, hint)
}

// fdPath is fcntl(F_GETPATH): the kernel's path of an open object. It goes
// through libc's fcntl (unix.FcntlInt), whose variadic third argument the
// runtime passes as darwin/arm64 wants it; libc's syscall(2) would not. The
// kernel writes through an address the runtime does not track, so the
// buffer is pinned: a heap object that neither moves nor is freed meanwhile.
func fdPath(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETPATH, int(uintptr(unsafe.Pointer(&buf[0])))); err != nil {
		return "", err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// renameNoReplace is renameatx_np(RENAME_EXCL); link(2) where the
// filesystem refuses the flag.
func (darwinFS) renameNoReplace(dfd int, from, to string) error {
	_, err := ignoringEINTR(func() (struct{}, error) {
		return struct{}{}, unix.RenameatxNp(dfd, from, dfd, to, unix.RENAME_EXCL)
	})
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL) {
		return linkNoReplace(dfd, from, to)
	}
	return err
}

// sync is F_FULLFSYNC, which asks the drive to flush its own cache (fsync
// on darwin does not); fsync where the filesystem refuses it.
func (darwinFS) sync(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0); err == nil {
		return nil
	}
	return unix.Fsync(fd)
}
