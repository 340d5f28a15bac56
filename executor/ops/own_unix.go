//go:build linux || darwin

package ops

import (
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// ownIDs are the identities (device, inode) of the executor's own files and
// directories, so that one reached under another name — a hard link, a bind
// mount of the state dir under an allowed root — is refused as itself.
//
// They are kept current: a state file replaced (written atomically, under a
// new inode) or the state dir made again changes the modification time of
// the directory that holds it, and the identities are then read again. An
// identity captured once would go stale both ways: the replaced file's new
// inode unknown, and its old inode number, freed, handed by the filesystem
// to a new workspace file that would then be refused.
type ownIDs struct {
	paths []string // canonical paths of the own files and directories

	mu    sync.Mutex
	ids   map[fileID]string // identity → own path, as last read
	watch []dirStamp        // the directories whose change makes ids stale
}

// dirStamp is what a directory looked like when the identities were read.
type dirStamp struct {
	path  string
	id    fileID
	mtime syscall.Timespec
	young bool // modified too recently to trust: a change in the same tick would not show
	gone  bool // it did not exist
}

// ownYoung: a directory modified this recently may change again without its
// modification time moving (coarse filesystem clocks).
const ownYoung = 100 * time.Millisecond

func newOwnIDs(paths []string) *ownIDs { return &ownIDs{paths: paths} }

// owner is the own path whose identity id is, "" when none; nil-safe.
func (o *ownIDs) owner(id fileID) string {
	if o == nil || len(o.paths) == 0 {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil || o.stale() {
		o.read()
	}
	return o.ids[id]
}

// read reads every own path's identity and stamps the directories that
// hold them (and the own directories themselves, whose entries may be
// replaced).
func (o *ownIDs) read() {
	o.ids = map[fileID]string{}
	o.watch = o.watch[:0]
	now := time.Now()
	var dirs []string
	for _, p := range o.paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err == nil {
			if t := st.Mode & syscall.S_IFMT; t == syscall.S_IFREG || t == syscall.S_IFDIR {
				o.ids[statID(&st)] = p
			}
			if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				dirs = append(dirs, p)
			}
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	slices.Sort(dirs)
	for _, d := range slices.Compact(dirs) {
		o.watch = append(o.watch, stampDir(d, now))
	}
}

func stampDir(path string, now time.Time) dirStamp {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return dirStamp{path: path, gone: true}
	}
	mt := statMtime(&st)
	return dirStamp{path: path, id: statID(&st), mtime: mt,
		young: now.Sub(time.Unix(mt.Unix())) < ownYoung}
}

// stale reports whether a watched directory has changed since read.
func (o *ownIDs) stale() bool {
	for _, w := range o.watch {
		if w.young {
			return true
		}
		var st syscall.Stat_t
		err := syscall.Stat(w.path, &st)
		if (err != nil) != w.gone {
			return true
		}
		if err == nil && (statID(&st) != w.id || statMtime(&st) != w.mtime) {
			return true
		}
	}
	return false
}
