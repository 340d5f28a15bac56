//go:build linux || darwin

package ops

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// The write family (§3.4). writeFile and writeFileExclusive assemble the
// payload in a staging file in the target's real directory, verify length
// and digest, fsync (fsys.sync), and then make it the target in one rename:
//
//   - writeFile replaces the target (rename(2)); an existing file's
//     permission bits (and, where allowed, owner and group) are kept, a new
//     file gets 0644 minus the umask. A final symlink is followed: the file
//     written is the one the path really leads to.
//   - writeFileExclusive creates the target only if its name is free:
//     fsys.renameNoReplace (renameat2 RENAME_NOREPLACE on Linux,
//     renameatx_np RENAME_EXCL on darwin), or link(2) where the filesystem
//     refuses that; anything at the name, a symlink included, is
//     already_exists.
//   - appendFile verifies the whole payload first, then appends it to the
//     target (created if absent) with a single write(2) on O_APPEND.
//
// Until the final step nothing but the staging file exists, and every
// failure removes it: the target is either untouched or whole.

// guardedAbsent answers writeFileGuarded, which this executor does not
// implement and does not declare (§3.2: absence is honest, emulation is
// forbidden). Linux and darwin can check a file's identity (fileId), or
// refuse an existing name (exclusive), but neither has a call that replaces
// a name only if it still names a given inode, nor one that pins the
// parent's path while renaming into it: a check followed by rename(2) is
// exactly the two-step emulation §3.5 forbids. docs/fs-ops.md gives the details.
func guardedAbsent() protocol.Outcome {
	return failf(protocol.ErrNotSupported, "writeFileGuarded is not implemented by this executor and not declared in its supports: "+
		"neither Linux nor darwin offers a single step that checks a file's identity and replaces it, and a check followed by a rename would be "+
		"the forbidden emulation (§3.2); use writeFile or writeFileExclusive")
}

func (op *fileOp) write(a protocol.WriteArgs) protocol.Outcome {
	kind := op.req.Kind
	if f := badPath(a.Path); f != nil {
		return *f
	}
	if a.ContentLen < 0 || a.ContentLen > protocol.MaxSafeInteger {
		return failf(protocol.ErrInvalid, "%s %q: contentLen %d is out of range", kind, a.Path, a.ContentLen)
	}
	if op.req.Payload == nil {
		return failf(protocol.ErrUnknown, "%s %q: %v", kind, a.Path, errNoPayload)
	}
	t, bad := op.resolveTarget(a.Path, kind != protocol.KindWriteFileExclusive)
	if bad != nil {
		return *bad
	}
	defer closeFD(t.dfd)
	if t.name == "." {
		return failf(protocol.ErrIsDirectory, "%s %q: it leads to a directory", kind, a.Path)
	}
	if kind != protocol.KindWriteFileExclusive && t.st != nil {
		if f := notRegular(kind, a.Path, uint32(t.st.Mode)); f != nil {
			return *f
		}
		// An append would change the executor's own file in place through a
		// hard link; a replace only the link's name, but both are refused.
		if f := op.contain.checkID(a.Path, unixID(t.st)); f != nil {
			return *f
		}
	}
	if kind == protocol.KindAppendFile {
		return op.appendFile(a, t)
	}

	s, out := op.receive(a, func() (*staging, error) { return op.stageBeside(t) })
	if out != nil {
		return out
	}
	defer s.discard()
	mode := newFileMode()
	if t.st != nil && kind == protocol.KindWriteFile {
		mode = uint32(t.st.Mode) & 0o777
		if int(t.st.Uid) != os.Geteuid() || int(t.st.Gid) != os.Getegid() {
			// Best effort: only root (or a member of the group) may; the
			// receipt's new inode tells the consumer it is a new object anyway.
			_ = unix.Fchown(int(s.f.Fd()), int(t.st.Uid), int(t.st.Gid))
		}
	}
	if err := s.f.Chmod(os.FileMode(mode)); err != nil {
		return stagingFailure("set the mode of the staging file for", a.Path, err)
	}
	if err := fsys.sync(int(s.f.Fd())); err != nil {
		return stagingFailure("fsync the staging file for", a.Path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
		return stagingFailure("stat the staging file for", a.Path, err)
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return stagingFailure("close the staging file for", a.Path, err)
	}
	if op.ctx.Err() != nil {
		return op.stopped()
	}

	var created *bool
	if kind == protocol.KindWriteFileExclusive {
		err = fsys.renameNoReplace(t.dfd, s.name, t.name)
		switch {
		case err == unix.EEXIST:
			return failf(protocol.ErrAlreadyExists, "writeFileExclusive %q: it already exists; nothing was written", a.Path)
		case errors.Is(err, errNoAtomicCreate):
			return failf(protocol.ErrNotSupported, "writeFileExclusive %q: %v; nothing was written", a.Path, err)
		}
		created = boolp(true)
	} else {
		created, err = createOrReplace(t.dfd, s.name, t.name)
	}
	if err != nil {
		return stagingFailure("rename the staging file onto", a.Path, err)
	}
	s.name = "" // it is the target now
	s.forget()
	syncDir(t.dfd)
	real := t.real
	if dir, err := fsys.realPath(t.dfd, t.hint); err == nil {
		real = joinPath(dir, t.name) // where the directory is now, after the rename
	}
	return protocol.WriteOutcome{CanonicalPath: real, Inode: strconv.FormatUint(st.Ino, 10), Created: created}
}

// appendFile appends the verified payload to t in one write(2) with
// O_APPEND, creating the file (0644 minus the umask) if it is absent, and
// fsyncs it. Once that write has begun, the effect cannot be taken back:
// a short or failed write after some bytes landed, or a failed fsync,
// answers outcome_unknown, never a retryable code.
func (op *fileOp) appendFile(a protocol.WriteArgs, t *writeTarget) protocol.Outcome {
	s, out := op.receive(a, stageAnonymous)
	if out != nil {
		return out
	}
	defer s.discard()
	if op.ctx.Err() != nil {
		return op.stopped()
	}
	mapped, release := mapStaged(s.f, a.ContentLen)
	defer release()
	var first []byte // without a mapping: the first piece, read back before the target is touched
	if mapped == nil && a.ContentLen > 0 {
		first = make([]byte, min(a.ContentLen, appendPiece))
		if _, err := s.f.ReadAt(first, 0); err != nil {
			return stagingFailure("read back the staged payload for", a.Path, err)
		}
	}

	fd, err := openFD(t.dfd, t.name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		if errnoOf(err) == unix.ELOOP {
			return failf(protocol.ErrUnknown, "appendFile %q: %q became a symlink while the payload arrived; nothing was appended", a.Path, t.real)
		}
		return osFailure("append to", a.Path, err)
	}
	defer closeFD(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return osFailure("stat", a.Path, err)
	}
	if f := notRegular(protocol.KindAppendFile, a.Path, uint32(st.Mode)); f != nil {
		return *f
	}
	n, err := appendStaged(fd, s.f, mapped, first, a.ContentLen)
	if err != nil {
		if n == 0 { // a read-back error comes only after the first piece landed
			return osFailure("append to", a.Path, err)
		}
		return failf(protocol.ErrOutcomeUnknown, "appendFile %q: appended only %d of %d bytes before: %s; the file now ends with a partial append",
			a.Path, n, a.ContentLen, errText(err))
	}
	if err := fsys.sync(fd); err != nil {
		return failf(protocol.ErrOutcomeUnknown, "appendFile %q: appended %d bytes but fsync failed: %s; they may not be durable",
			a.Path, n, errText(err))
	}
	return protocol.VoidOutcome{}
}

// mapStaged maps the n staged bytes of f read-only, or returns nil when it
// cannot (then appendStaged reads them back in pieces). The mapping holds
// no memory of its own: its pages are the staging file's page cache, which
// the payload has just filled, clean and reclaimable once written back (the
// process's RSS counts them as RssFile while they are mapped).
func mapStaged(f *os.File, n int64) (data []byte, release func()) {
	if n == 0 || n > int64(int(^uint(0)>>1)) {
		return nil, func() {}
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, func() {}
	}
	return b, func() { _ = unix.Munmap(b) }
}

// appendPiece is the read-back buffer of an append whose staging file
// cannot be mapped: the memory an append holds, whatever its size.
const appendPiece = 1 << 20

// readBackError: reading the staging file back failed.
type readBackError struct{ err error }

func (e *readBackError) Error() string { return "reading back the staged payload: " + errText(e.err) }

// appendStaged appends the n bytes staged in f to fd and returns how many
// landed. From the mapping, with one write(2) (further calls only if the
// kernel writes less: over 2 GiB, a full disk); without one, read back
// and written appendPiece bytes at a time, first being the first piece,
// already read.
func appendStaged(fd int, f *os.File, mapped, first []byte, n int64) (int64, error) {
	if mapped != nil || n == 0 {
		return writeAll(fd, mapped)
	}
	buf := first
	var done int64
	for done < n {
		piece := buf[:min(int64(len(buf)), n-done)]
		if done > 0 {
			if _, err := f.ReadAt(piece, done); err != nil {
				return done, &readBackError{err}
			}
		}
		m, err := writeAll(fd, piece)
		done += m
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// writeAll writes data to fd, retrying short writes.
func writeAll(fd int, data []byte) (int64, error) {
	n := 0
	for n < len(data) {
		m, err := ignoringEINTR(func() (int, error) { return unix.Write(fd, data[n:]) })
		if m > 0 {
			n += m
		}
		if err == nil && m > 0 {
			continue
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		return int64(n), err
	}
	return int64(n), nil
}

// notRegular refuses a write onto something that is not a regular file.
func notRegular(kind protocol.InstructionKind, p string, mode uint32) *protocol.Failure {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		f := failf(protocol.ErrIsDirectory, "%s %q: it is a directory", kind, p)
		return &f
	}
	f := failf(protocol.ErrInvalid, "%s %q: it is a %s, not a regular file", kind, p, typeName(mode))
	return &f
}

// writeTarget is where a path leads: the name in its real directory.
type writeTarget struct {
	dfd  int          // the real directory holding name, held with fsys.dirFlags; the caller closes it
	hint string       // dfd's hint for fsys.realPath
	name string       // the final name, never a symlink when followed; "." for dfd itself
	dir  string       // the real path of dfd when resolved
	real string       // the real path of the target when resolved
	st   *unix.Stat_t // the object at name, nil when absent
}

// maxHops bounds symlink following, like the kernel's 40.
const maxHops = 40

// resolveTarget finds where p leads, for the writes, the reads and
// canonicalPath. The parent directories are resolved by the backend
// (fsys.openDir); with follow, a final symlink is followed hop by hop (its
// target's directory again opened by the backend) until a name that is not
// a symlink, or that does not exist: a dangling symlink is written through,
// as open(2) with O_CREAT does. A symlink to a directory ("..", "/", "d/")
// ends on that directory itself, named ".". The real path of the result is
// checked against the containment policy.
func (op *fileOp) resolveTarget(p string, follow bool) (*writeTarget, *protocol.Failure) {
	kind := op.req.Kind
	dir, name := splitPath(p)
	dfd, hint, err := fsys.openDir(unix.AT_FDCWD, "", dir)
	if err != nil {
		if f := op.contain.checkAbsent(p); f != nil {
			return nil, f
		}
		f := failf(codeOf(err), "%s %q: its directory %q: %s", kind, p, dir, errText(err))
		return nil, &f
	}
	t := &writeTarget{dfd: dfd, hint: hint, name: name}
	failWith := func(f protocol.Failure) (*writeTarget, *protocol.Failure) {
		closeFD(t.dfd)
		return nil, &f
	}
	for hops := 0; ; hops++ {
		var st unix.Stat_t
		err := unix.Fstatat(t.dfd, t.name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT {
			break
		}
		if err != nil {
			return failWith(osFailure("stat", p, err))
		}
		if !follow || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			t.st = &st
			break
		}
		if hops == maxHops {
			return failWith(osFailure("resolve", p, unix.ELOOP))
		}
		link, err := readlinkAt(t.dfd, t.name)
		if err != nil {
			return failWith(osFailure("read the symlink", p, err))
		}
		ldir, next := "", link
		if i := strings.LastIndexByte(link, '/'); i >= 0 {
			ldir, next = link[:i], link[i+1:]
			if ldir == "" {
				ldir = "/"
			}
		}
		if next == "" || next == "." || next == ".." {
			ldir, next = link, "."
		}
		if ldir != "" {
			nfd, nhint, err := fsys.openDir(t.dfd, t.hint, ldir)
			if err != nil {
				return failWith(failf(codeOf(err), "%s %q: the directory %q its symlink leads to: %s", kind, p, ldir, errText(err)))
			}
			closeFD(t.dfd)
			t.dfd, t.hint = nfd, nhint
		}
		t.name = next
	}
	dreal, err := fsys.realPath(t.dfd, t.hint)
	if err != nil {
		return failWith(osFailure("resolve the directory of", p, err))
	}
	t.dir, t.real = dreal, joinPath(dreal, t.name)
	if f := op.contain.check(p, t.real); f != nil {
		return failWith(*f)
	}
	return t, nil
}

// readlinkAt reads the symlink name in dfd, however long its target.
func readlinkAt(dfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := ignoringEINTR(func() (int, error) { return unix.Readlinkat(dfd, name, buf) })
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// createOrReplace renames from onto to within dfd and reports whether that
// created to: true when to was absent at the moment of an atomic
// create-if-absent rename, false when that found to present and a plain
// rename replaced it. When the filesystem cannot create atomically, it
// renames and reports nil: created unknown (§3.3 lets the consumer take the
// weaker answer).
func createOrReplace(dfd int, from, to string) (*bool, error) {
	err := fsys.renameNoReplace(dfd, from, to)
	if err == nil {
		return boolp(true), nil
	}
	if err != unix.EEXIST && !errors.Is(err, errNoAtomicCreate) {
		return nil, err
	}
	if _, rerr := ignoringEINTR(func() (struct{}, error) { return struct{}{}, unix.Renameat(dfd, from, dfd, to) }); rerr != nil {
		return nil, rerr
	}
	if err == unix.EEXIST {
		return boolp(false), nil
	}
	return nil, nil
}

// syncDir makes a rename in dfd durable. Best effort: the rename has
// happened and is visible; a directory that cannot be fsynced does not undo
// it, so the error is not reported.
func syncDir(dfd int) {
	fd, err := openFD(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	_ = fsys.sync(fd)
	closeFD(fd)
}

// newFileMode is the mode of a file a write creates: 0644 minus the umask.
func newFileMode() uint32 { return 0o644 &^ fsys.umask() }

func boolp(v bool) *bool { return &v }
