package ops

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// linuxFS is the Linux backend: the kernel resolves every path (O_PATH, so
// no permission beyond search is needed and opening has no side effects)
// and says where an open directory really is (/proc/self/fd/N).
type linuxFS struct{}

func nativeBackend() backend { return linuxFS{} }

// portableBackend is the backend darwin runs, here as Linux can run it:
// the walk holds directories O_PATH, as darwin holds them O_SEARCH.
func portableBackend() backend {
	return portableFS{flags: unix.O_PATH | unix.O_DIRECTORY, statPath: unix.Lstat}
}

func (linuxFS) name() string  { return "linux" }
func (linuxFS) dirFlags() int { return unix.O_PATH | unix.O_DIRECTORY }

func (linuxFS) openDir(at int, atHint, name string) (int, string, error) {
	hint := name
	if strings.HasPrefix(name, "/") {
		at = unix.AT_FDCWD
	} else {
		hint = atHint + "/" + name
	}
	fd, err := openFD(at, name, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, hint, err
}

// realPath is the kernel's own answer through /proc/self/fd, checked
// against the object's identity. When /proc is not mounted it falls back to
// resolving hint (an absolute path that led to the object) with
// filepath.EvalSymlinks, under the same check.
func (linuxFS) realPath(fd int, hint string) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		if _, statErr := os.Stat("/proc/self/fd"); statErr == nil {
			return "", err
		}
		if p, err = filepath.EvalSymlinks(hint); err != nil {
			return "", err
		}
	}
	if err := sameObject(fd, p, unix.Lstat); err != nil {
		return "", err
	}
	return p, nil
}

// renameNoReplace: renameat2(RENAME_NOREPLACE), or where the filesystem
// refuses that flag, link(2) and unlink(2).
func (linuxFS) renameNoReplace(dfd int, from, to string) error {
	_, err := ignoringEINTR(func() (struct{}, error) {
		return struct{}{}, unix.Renameat2(dfd, from, dfd, to, unix.RENAME_NOREPLACE)
	})
	if err != unix.EINVAL && err != unix.ENOSYS {
		return err
	}
	return linkNoReplace(dfd, from, to)
}

func (linuxFS) sync(fd int) error { return unix.Fsync(fd) }

func (linuxFS) tmpFile(dir string) (int, error) {
	return openFD(unix.AT_FDCWD, dir, unix.O_RDWR|unix.O_TMPFILE, 0o600)
}

// writeback: sync_file_range(SYNC_FILE_RANGE_WRITE), which does not wait.
func (linuxFS) writeback(fd int, off, n int64) {
	_ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// umask is read from /proc/self/status, so a later umask(2) counts; without
// /proc it is the umask at start.
func (linuxFS) umask() uint32 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return umaskAtStart
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			if u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(u)
			}
			break
		}
	}
	return umaskAtStart
}
