//go:build linux || darwin

package ops

import (
	"os"
	"slices"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// The stat family answers {ok:true, kind:"stat"} with the one field each
// kind asks for. fileInfo, exists, canonicalPath and readLink are the
// governance reads (§6.5): they report the filesystem as the kernel sees it
// or fail with a real code; they never guess. fileInfo, exists, readLink
// (and listDir's entries) look at the final name itself (lstat: a symlink
// is reported as a symlink, not followed); canonicalPath and listDir's
// directory follow every symlink.

// entry is a path's final name in its opened, real parent directory.
type pathEntry struct {
	dfd  int    // the parent, held with fsys.dirFlags; the caller closes it
	name string // the final name, "." for "/"
	real string // the real path of the entry itself (the final name is not followed)
}

// openEntry opens p's parent (following symlinks in it) and checks the
// entry's real path against the containment policy. A parent that does not
// exist is not_found, one that is a file not_directory; verb says what the
// op was doing, for messages.
func (op *fileOp) openEntry(verb, p string) (*pathEntry, *protocol.Failure) {
	if f := badPath(p); f != nil {
		return nil, f
	}
	dir, name := splitPath(p)
	dfd, hint, err := fsys.openDir(unix.AT_FDCWD, "", dir)
	if err != nil {
		f := op.contain.osFail(verb, p, &os.PathError{Op: "open", Path: dir, Err: err})
		return nil, &f
	}
	dreal, err := fsys.realPath(dfd, hint)
	if err != nil {
		closeFD(dfd)
		f := osFailure("resolve", p, err)
		return nil, &f
	}
	e := &pathEntry{dfd: dfd, name: name, real: joinPath(dreal, name)}
	if f := op.contain.check(p, e.real); f != nil {
		closeFD(dfd)
		return nil, f
	}
	return e, nil
}

// infoOf is the WireFileInfo of an lstat result. mode is the raw st_mode:
// the file type bits (S_IFMT) and the permission bits including setuid,
// setgid and sticky, as stat(2) and Node's fs.Stats.mode report it.
func infoOf(p string, st *unix.Stat_t) protocol.FileInfo {
	kind := protocol.FileKindOther
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
		kind = protocol.FileKindFile
	case unix.S_IFDIR:
		kind = protocol.FileKindDir
	case unix.S_IFLNK:
		kind = protocol.FileKindSymlink
	}
	mode := uint32(st.Mode)
	return protocol.FileInfo{
		Path:    p,
		Kind:    kind,
		Size:    st.Size,
		MtimeMs: int64(st.Mtim.Sec)*1000 + int64(st.Mtim.Nsec)/1e6,
		Mode:    &mode,
	}
}

func (op *fileOp) fileInfo(p string) protocol.Outcome {
	e, f := op.openEntry("stat", p)
	if f != nil {
		return *f
	}
	defer closeFD(e.dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(e.dfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return osFailure("stat", p, err)
	}
	info := infoOf(p, &st)
	return protocol.StatOutcome{Info: &info}
}

// exists answers whether the name exists (lstat: a dangling symlink
// exists). A path that cannot exist because its parent does not, or is a
// file, is false; a parent that cannot be searched is a failure, not false.
func (op *fileOp) exists(p string) protocol.Outcome {
	e, f := op.openEntry("stat", p)
	if f != nil {
		if f.ErrorCode == protocol.ErrNotFound || f.ErrorCode == protocol.ErrNotDirectory {
			return protocol.StatOutcome{ExistsValue: boolp(false)}
		}
		return *f
	}
	defer closeFD(e.dfd)
	var st unix.Stat_t
	switch err := unix.Fstatat(e.dfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); errnoOf(err) {
	case 0:
		return protocol.StatOutcome{ExistsValue: boolp(true)}
	case unix.ENOENT, unix.ENOTDIR:
		return protocol.StatOutcome{ExistsValue: boolp(false)}
	default:
		return osFailure("stat", p, err)
	}
}

// canonicalPath answers the real path through every symlink and "..", as
// the kernel resolves it; not_found when the path (or a symlink's target)
// does not exist.
func (op *fileOp) canonicalPath(p string) protocol.Outcome {
	if f := badPath(p); f != nil {
		return *f
	}
	t, f := op.resolveTarget(p, true)
	if f != nil {
		return *f
	}
	defer closeFD(t.dfd)
	if t.st == nil {
		return osFailure("resolve", p, unix.ENOENT)
	}
	if f := unencodable(p, "its real path", t.real); f != nil {
		return *f
	}
	return protocol.StatOutcome{CanonicalPath: t.real}
}

// readLink answers one hop: the symlink's target exactly as stored
// (possibly relative, never resolved), or null when p is not a symlink.
func (op *fileOp) readLink(p string) protocol.Outcome {
	e, f := op.openEntry("read the symlink", p)
	if f != nil {
		return *f
	}
	defer closeFD(e.dfd)
	link, err := readlinkAt(e.dfd, e.name)
	if errnoOf(err) == unix.EINVAL {
		return protocol.StatOutcome{LinkTarget: &protocol.LinkTarget{}}
	}
	if err != nil {
		return osFailure("read the symlink", p, err)
	}
	if f := unencodable(p, "its target", link); f != nil {
		return *f
	}
	return protocol.StatOutcome{LinkTarget: &protocol.LinkTarget{IsSymlink: true, Target: link}}
}

// listBudget is the most bytes a listing's outcome may encode to: a result
// frame must fit in MaxFrameBytes with its envelope (§2.1), and an
// over-size frame costs the whole connection (§8). A variable only so that
// a test can lower it.
var listBudget = protocol.MaxFrameBytes - 4096

// listDir answers the entries of a directory (following symlinks to it),
// sorted by name, each with Path = the requested path joined with the
// name, and lstat facts. An entry removed while listing is left out. A
// listing that cannot fit in one result frame is refused rather than cut.
func (op *fileOp) listDir(p string) protocol.Outcome {
	if f := badPath(p); f != nil {
		return *f
	}
	fd, hint, err := fsys.openDir(unix.AT_FDCWD, "", p)
	if err != nil {
		return op.contain.osFail("list", p, err)
	}
	defer closeFD(fd)
	real, err := fsys.realPath(fd, hint)
	if err != nil {
		return osFailure("resolve", p, err)
	}
	if f := op.contain.check(p, real); f != nil {
		return *f
	}
	names, err := readNames(fd)
	if err != nil {
		return osFailure("list", p, err)
	}
	slices.Sort(names)
	entries := make([]protocol.FileInfo, 0, len(names))
	for i, name := range names {
		if i%256 == 0 && op.ctx.Err() != nil {
			return op.stopped()
		}
		if f := unencodable(p, "an entry", name); f != nil {
			return *f
		}
		var st unix.Stat_t
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return osFailure("stat", joinPath(p, name), err)
		}
		entries = append(entries, infoOf(joinPath(p, name), &st))
	}
	out := protocol.StatOutcome{Entries: entries}
	b, err := json.Marshal(out)
	if err != nil {
		return failf(protocol.ErrUnknown, "listDir %q: the listing cannot be encoded: %v", p, err)
	}
	if len(b) > listBudget {
		return failf(protocol.ErrInvalid, "listDir %q: its %d entries encode to %d bytes, more than one result frame carries (%d); list a narrower directory",
			p, len(entries), len(b), listBudget)
	}
	return out
}

// readNames reads every name in the directory dfd except "." and "..",
// through a descriptor of its own opened for reading (dfd may be held
// without read permission), so every call lists from the start.
func readNames(dfd int) ([]string, error) {
	fd, err := openFD(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), ".")
	defer d.Close()
	return d.Readdirnames(-1)
}

// unencodable refuses a name the OS holds that is not valid UTF-8: a JSON
// string cannot carry it, and a replacement character would report a path
// that does not exist (§6.5).
func unencodable(p, what, s string) *protocol.Failure {
	if utf8.ValidString(s) {
		return nil
	}
	f := failf(protocol.ErrInvalid, "%q: %s %q is not valid UTF-8, which the protocol's JSON cannot carry", p, what, s)
	return &f
}
