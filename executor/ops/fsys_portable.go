//go:build linux || darwin

package ops

import "golang.org/x/sys/unix"

// portableFS is the backend built on POSIX *at calls alone: paths are
// walked one component at a time (walk.go), and a real path is the one the
// walk proved, checked against the object's identity. darwin runs it with
// its own wrappers (fsys_darwin.go); Linux runs it in the tests, so that
// the code darwin runs is tested here (docs/fs-ops.md).
type portableFS struct {
	// flags hold a directory for walking: O_PATH|O_DIRECTORY on Linux,
	// O_SEARCH on darwin (O_RDONLY|O_DIRECTORY where it is missing).
	flags int
	// statPath gives the identity of an absolute path for the check of a
	// real path: lstat; on darwin a lookup that refuses any symlink on the
	// way (O_NOFOLLOW_ANY).
	statPath func(string, *unix.Stat_t) error
}

func (portableFS) name() string    { return "portable" }
func (p portableFS) dirFlags() int { return p.flags }

func (p portableFS) openDir(at int, atHint, name string) (int, string, error) {
	return walkDir(at, atHint, name, p.flags)
}

// realPath is the path the walk proved (hint), checked to name fd's
// directory now.
func (p portableFS) realPath(fd int, hint string) (string, error) {
	if err := sameObject(fd, hint, p.statPath); err != nil {
		return "", err
	}
	return hint, nil
}

func (portableFS) renameNoReplace(dfd int, from, to string) error {
	return linkNoReplace(dfd, from, to)
}

func (portableFS) sync(fd int) error           { return unix.Fsync(fd) }
func (portableFS) tmpFile(string) (int, error) { return -1, errNoTmpFile }
func (portableFS) writeback(int, int64, int64) {}
func (portableFS) umask() uint32               { return umaskAtStart }
