//go:build linux || darwin

package ops

import (
	"strings"

	"golang.org/x/sys/unix"
)

// walkDir opens the directory name leads to without ever letting the
// kernel follow a symlink: from "/" (an absolute name) or from the open
// directory at whose real path is atReal, each component is opened
// O_NOFOLLOW relative to the one before; a component that is a symlink is
// read (readlinkat) and its target walked in its place, from "/" when it is
// absolute; ".." steps back to the parent, and is "/" at "/". At most
// maxHops symlinks are followed, as the kernel allows 40. The returned real
// path is the one the walk proved, component by component; realPath checks
// it against the object's identity before anything relies on it.
func walkDir(at int, atReal, name string, flags int) (fd int, real string, err error) {
	cur, real := -1, atReal
	if strings.HasPrefix(name, "/") {
		cur, real, err = openRoot(flags)
	} else {
		cur, err = dupFD(at)
	}
	if err != nil {
		return -1, "", err
	}
	todo := pushComponents(nil, name)
	for hops := 0; len(todo) > 0; {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		switch c {
		case "", ".":
			continue
		case "..":
			if real == "/" {
				continue
			}
			nfd, err := openFD(cur, "..", flags, 0)
			if err != nil {
				closeFD(cur)
				return -1, "", err
			}
			closeFD(cur)
			cur, real = nfd, parentOf(real)
			continue
		}
		nfd, err := openFD(cur, c, flags|unix.O_NOFOLLOW, 0)
		if err == nil {
			closeFD(cur)
			cur, real = nfd, joinPath(real, c)
			continue
		}
		// A symlink opened O_NOFOLLOW fails ELOOP; with O_DIRECTORY Linux
		// says ENOTDIR first. Either way, whether it is a link is asked.
		link, lerr := "", err
		if e := errnoOf(err); e == unix.ELOOP || e == unix.ENOTDIR {
			link, lerr = readlinkAt(cur, c)
		}
		if lerr != nil { // not a symlink: the open's own error stands
			closeFD(cur)
			return -1, "", err
		}
		if hops++; hops > maxHops {
			closeFD(cur)
			return -1, "", unix.ELOOP
		}
		if strings.HasPrefix(link, "/") {
			closeFD(cur)
			if cur, real, err = openRoot(flags); err != nil {
				return -1, "", err
			}
		}
		todo = pushComponents(todo, link)
	}
	return cur, real, nil
}

// openRoot opens "/".
func openRoot(flags int) (int, string, error) {
	fd, err := openFD(unix.AT_FDCWD, "/", flags, 0)
	return fd, "/", err
}

// dupFD duplicates fd, close-on-exec.
func dupFD(fd int) (int, error) {
	return ignoringEINTR(func() (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) })
}

// pushComponents pushes the components of p onto the stack todo, whose top
// is its end, so that p's first component is walked next.
func pushComponents(todo []string, p string) []string {
	parts := strings.Split(p, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		todo = append(todo, parts[i])
	}
	return todo
}

// parentOf is the parent of a real absolute path; "/" is its own.
func parentOf(real string) string {
	dir, _ := splitPath(real)
	return dir
}
