//go:build linux || darwin

package ops

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// Directories and temporary objects: createDir and remove answer
// {ok:true, kind:"void"}; createTempDir and createTempFile answer the
// created object as a write receipt. Every step works relative to an open
// directory descriptor, never by re-walking a path, so a symlink swapped in
// while the op runs cannot redirect it.

// createDir creates p. recursive (true when absent, as the server sends
// it) creates missing parents, and a directory already there is success;
// without it the parent must exist and anything already at p is
// already_exists. A non-directory in the way is not_directory. New
// directories get 0777 minus the umask.
func (op *fileOp) createDir(a protocol.DirArgs) protocol.Outcome {
	p := a.Path
	if a.Recursive == nil || *a.Recursive {
		return op.mkdirAll(p)
	}
	e, f := op.openEntry("create the directory", p)
	if f != nil {
		return *f
	}
	defer closeFD(e.dfd)
	switch err := unix.Mkdirat(e.dfd, e.name, 0o777); errnoOf(err) {
	case 0:
		return protocol.VoidOutcome{}
	case unix.EEXIST:
		return failf(protocol.ErrAlreadyExists, "createDir %q: it already exists (recursive is false)", p)
	default:
		return osFailure("create the directory", p, err)
	}
}

// mkdirAll creates p and its missing parents: it opens the deepest existing
// ancestor (following symlinks), checks where p will really be, then
// creates and descends one component at a time without following.
func (op *fileOp) mkdirAll(p string) protocol.Outcome {
	if f := badPath(p); f != nil {
		return *f
	}
	var comps []string
	if p != "/" {
		comps = strings.Split(p[1:], "/")
	}
	i, dfd, hint := len(comps), -1, ""
	for ; i >= 0; i-- {
		anc := "/" + strings.Join(comps[:i], "/")
		fd, h, err := fsys.openDir(unix.AT_FDCWD, "", anc)
		if err == nil {
			dfd, hint = fd, h
			break
		}
		if errnoOf(err) == unix.ENOENT && i > 0 {
			continue
		}
		if f := op.contain.checkAbsent(p); f != nil {
			return *f
		}
		if errnoOf(err) == unix.ENOTDIR {
			return failf(protocol.ErrNotDirectory, "createDir %q: %q is not a directory (or lies below a file)", p, anc)
		}
		return osFailure("create the directory", p, &os.PathError{Op: "open", Path: anc, Err: err})
	}
	defer func() { closeFD(dfd) }()
	base := "/" + strings.Join(comps[:i], "/")
	dreal, err := fsys.realPath(dfd, hint)
	if err != nil {
		return osFailure("resolve", base, err)
	}
	real := dreal
	for _, c := range comps[i:] {
		real = joinPath(real, c)
	}
	if f := op.contain.check(p, real); f != nil {
		return *f
	}
	cur := base
	for _, c := range comps[i:] {
		if op.ctx.Err() != nil {
			return op.stopped()
		}
		cur = joinPath(cur, c)
		err := unix.Mkdirat(dfd, c, 0o777)
		if err == nil {
			op.started, op.changed = true, true
		} else if err != unix.EEXIST {
			return osFailure("create the directory", cur, err)
		}
		nfd, err := openFD(dfd, c, fsys.dirFlags()|unix.O_NOFOLLOW, 0)
		if err != nil {
			// A symlink in the way is ELOOP, or ENOTDIR with O_DIRECTORY on Linux.
			if e := errnoOf(err); e == unix.ENOTDIR || e == unix.ELOOP {
				return failf(protocol.ErrNotDirectory, "createDir %q: %q exists and is not a directory", p, cur)
			}
			return osFailure("open the directory", cur, err)
		}
		closeFD(dfd)
		dfd = nfd
	}
	return protocol.VoidOutcome{}
}

// remove removes p itself, never what a final symlink leads to. A file or
// symlink is unlinked, an empty directory removed; a non-empty directory
// needs recursive (false when absent, as the server sends it) and is
// otherwise refused invalid with nothing removed. "/" is always refused.
func (op *fileOp) remove(a protocol.DirArgs) protocol.Outcome {
	p := a.Path
	if p == "/" {
		return failf(protocol.ErrInvalid, "remove %q: refusing to remove the root directory", p)
	}
	e, f := op.openEntry("remove", p)
	if f != nil {
		return *f
	}
	defer closeFD(e.dfd)
	if f := op.contain.checkRemove(p, e.real); f != nil {
		return *f
	}
	var st unix.Stat_t
	if err := unix.Fstatat(e.dfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return osFailure("remove", p, err)
	}
	if f := op.contain.checkID(p, unixID(&st)); f != nil {
		return *f
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(e.dfd, e.name, 0); err != nil {
			return osFailure("remove", p, err)
		}
		return protocol.VoidOutcome{}
	}
	if a.Recursive == nil || !*a.Recursive {
		switch err := unix.Unlinkat(e.dfd, e.name, unix.AT_REMOVEDIR); errnoOf(err) {
		case 0:
			return protocol.VoidOutcome{}
		case unix.ENOTEMPTY, unix.EEXIST:
			return failf(protocol.ErrInvalid, "remove %q: it is a directory that is not empty; nothing was removed (recursive is false)", p)
		default:
			return osFailure("remove", p, err)
		}
	}
	// The executor's own files may lie in the tree under other names (a
	// bind mount of the state dir, a hard link to the key): looked for
	// first, so that such a tree is refused with nothing removed.
	if own, err := op.findOwn(e.dfd, e.name, p); err != nil || own != nil {
		switch {
		case errors.Is(err, errStopped):
			return op.stopped()
		case own != nil:
			f := *op.contain.checkID(own.path, own.id)
			f.Message += "; nothing was removed"
			return f
		}
		return osFailure("remove", p, err)
	}
	var n int
	err := op.removeTree(e.dfd, e.name, p, &n)
	var owned *ownInTree
	switch {
	case err == nil:
		return protocol.VoidOutcome{}
	case errors.Is(err, errStopped):
		return op.stopped()
	case errors.As(err, &owned):
		f := *op.contain.checkID(owned.path, owned.id)
		f.Message += "; " + strconv.Itoa(n) + " entries were removed before it appeared there, the rest is kept"
		return f
	case n > 0:
		f := osFailure("remove", p, err)
		f.Message += "; " + strconv.Itoa(n) + " entries were removed before this, the tree is partly removed"
		return f
	}
	return osFailure("remove", p, err)
}

// errStopped: the op's context was done in the middle of a removal.
var errStopped = errors.New("stopped")

// ownInTree: one of the executor's own files or directories is in a tree
// being removed, under another name.
type ownInTree struct {
	path string
	id   fileID
}

func (e *ownInTree) Error() string { return e.path + " is one of the executor's own files" }

// findOwn walks name in dfd and everything below it, without following
// symlinks or changing anything, and returns the first entry (named from
// p) that is one of the executor's own files or directories, nil when none.
func (op *fileOp) findOwn(dfd int, name, p string) (*ownInTree, error) {
	if op.ctx.Err() != nil {
		return nil, errStopped
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil, nil
		}
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if id := unixID(&st); op.contain.ids.owner(id) != "" {
		return &ownInTree{path: p, id: id}, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, nil
	}
	fd, err := openFD(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, nil
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer closeFD(fd)
	names, err := readNames(fd)
	if err != nil {
		return nil, &os.PathError{Op: "list", Path: p, Err: err}
	}
	for _, c := range names {
		if own, err := op.findOwn(fd, c, joinPath(p, c)); err != nil || own != nil {
			return own, err
		}
	}
	return nil, nil
}

// removeTree removes name in dfd and everything below it, without following
// symlinks, counting removed entries in n. p names it for errors.
func (op *fileOp) removeTree(dfd int, name, p string, n *int) error {
	if op.ctx.Err() != nil {
		return errStopped
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if id := unixID(&st); op.contain.ids.owner(id) != "" {
		return &ownInTree{path: p, id: id} // appeared since findOwn looked
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
			return &os.PathError{Op: "unlink", Path: p, Err: err}
		}
		*n++
		op.started, op.changed = true, true
		return nil
	}
	fd, err := openFD(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer closeFD(fd)
	for attempt := 0; ; attempt++ {
		names, err := readNames(fd) // from the start each time
		if err != nil {
			return &os.PathError{Op: "list", Path: p, Err: err}
		}
		for _, c := range names {
			if err := op.removeTree(fd, c, joinPath(p, c), n); err != nil {
				return err
			}
		}
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil:
			*n++
			op.started, op.changed = true, true
			return nil
		case err == unix.ENOENT:
			return nil
		case (err == unix.ENOTEMPTY || err == unix.EEXIST) && attempt < 8:
			continue // something was created meanwhile: list again
		}
		return &os.PathError{Op: "rmdir", Path: p, Err: err}
	}
}

// createTemp answers createTempDir (dir) and createTempFile: a new
// directory (0700) or empty file (0600) in Env.TempDir named prefix,
// random characters, suffix. The receipt is its canonical path, its inode
// and created: true.
func (op *fileOp) createTemp(prefix, suffix string, dir bool) protocol.Outcome {
	kind := op.req.Kind
	for _, part := range []string{prefix, suffix} {
		if strings.ContainsAny(part, "/\x00") {
			return failf(protocol.ErrInvalid, "%s: prefix and suffix must be plain names, without '/' or NUL; got %q", kind, part)
		}
	}
	tmp := op.tempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	if !filepath.IsAbs(tmp) {
		return failf(protocol.ErrUnknown, "%s: the temporary directory %q is not an absolute path", kind, tmp)
	}
	dfd, hint, err := fsys.openDir(unix.AT_FDCWD, "", tmp)
	if err != nil {
		return op.contain.osFail("open the temporary directory", tmp, err)
	}
	defer closeFD(dfd)
	dreal, err := fsys.realPath(dfd, hint)
	if err != nil {
		return osFailure("resolve the temporary directory", tmp, err)
	}
	if f := unencodable(tmp, "its real path", dreal); f != nil {
		return *f
	}
	for range 100 {
		var r [6]byte
		_, _ = rand.Read(r[:]) // never fails (crypto/rand)
		name := prefix + hex.EncodeToString(r[:]) + suffix
		real := joinPath(dreal, name)
		if f := op.contain.check(real, real); f != nil {
			return *f
		}
		var st unix.Stat_t
		if dir {
			err = unix.Mkdirat(dfd, name, 0o700)
			if err == nil {
				op.started = true
				err = unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			}
		} else {
			var fd int
			fd, err = openFD(dfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
			if err == nil {
				op.started = true
				err = unix.Fstat(fd, &st)
				closeFD(fd)
			}
		}
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return osFailure("create in the temporary directory", real, err)
		}
		return protocol.WriteOutcome{CanonicalPath: real, Inode: strconv.FormatUint(st.Ino, 10), Created: boolp(true)}
	}
	return failf(protocol.ErrUnknown, "%s: 100 random names in %q were all taken", kind, dreal)
}
