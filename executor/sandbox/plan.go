package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Access is what a rule grants beneath its path, independent of the
// kernel's encoding.
type Access uint8

const (
	// List lets a directory's entries be listed.
	List Access = 1 << iota
	// Read lets files be read and executed.
	Read
	// Write lets files be written and truncated.
	Write
	// Make lets entries be created, removed and renamed.
	Make
)

// Grant sets: what the whole filesystem, a writable root and a device get.
const (
	ReadAccess   = List | Read
	WriteAccess  = Write | Make
	DeviceAccess = Write
)

// Rule grants Access on Path and everything beneath it. Dir is false for a
// file, on which only Read and Write mean anything.
type Rule struct {
	Path   string
	Access Access
	Dir    bool
}

// Plan is a policy as hierarchy grants, the form Landlock takes: allow-only
// rules, each covering a whole tree. A hidden path inside a granted tree is
// cut out by granting the tree's entries one by one around it (and the tree
// itself only List, so that a hidden directory's names stay listable, never
// its contents).
type Plan struct {
	Rules []Rule
	// Watched are the directories whose entries were listed to cut around a
	// hidden path, with what they looked like then. An entry created or
	// removed in one of them since changes its modification time, and the
	// plan must be made again (Stale).
	Watched []Watched
}

// Watched is a root or a listed directory the plan depends on: a root by
// its identity, a listed directory by its entries too.
type Watched struct {
	Path    string
	Dev     uint64
	Ino     uint64
	Missing bool      // it was not there (or not a directory): it must not appear
	Listed  bool      // its entries were listed: MTime must not move either
	MTime   time.Time // when Listed
	// Young: a listed directory's modification time was too recent to
	// trust, since a change within the filesystem's timestamp granularity
	// would not move it.
	Young bool
}

// youngWithin: a directory modified this recently may change again without
// its modification time moving (ext4 stamps with a coarse clock).
const youngWithin = 100 * time.Millisecond

// MakePlan renders the policy's filesystem part as hierarchy grants: read
// on the whole filesystem, write on each writable root and device, each cut
// around every hidden path.
func MakePlan(p Policy, now time.Time) Plan {
	var pl planner
	pl.now = now
	pl.grant("/", ReadAccess, p.Hidden, true)
	for _, w := range p.Writable {
		pl.grant(w, WriteAccess|ReadAccess, p.Hidden, true)
	}
	for _, d := range p.Devices {
		pl.grant(d, DeviceAccess, p.Hidden, false) // a device node is not replaced
	}
	return pl.plan
}

type planner struct {
	now  time.Time
	plan Plan
}

// grant adds rules giving access beneath root except under each hidden
// path; watch: the plan depends on root staying the same directory.
func (pl *planner) grant(root string, access Access, hidden []string, watch bool) {
	fi, err := os.Lstat(root)
	if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		if watch {
			// Nothing there to grant now (a root is canonical: no
			// symlink); once there is, the plan is made again.
			pl.plan.Watched = append(pl.plan.Watched, Watched{Path: root, Missing: true})
		}
		return
	}
	if watch {
		pl.watch(root, fi, false)
	}
	pl.cut(root, fi.IsDir(), access, hidden)
}

// cut grants access on path, or around the hidden paths inside it. Only a
// directory with a hidden path inside is looked at (and listed): every
// other entry is one rule, known by its name and type alone.
func (pl *planner) cut(path string, isDir bool, access Access, hidden []string) {
	if slices.ContainsFunc(hidden, func(h string) bool { return Within(path, h) }) {
		return
	}
	if !isDir {
		pl.plan.Rules = append(pl.plan.Rules, Rule{Path: path, Access: access & (Read | Write)})
		return
	}
	inside := slices.ContainsFunc(hidden, func(h string) bool { return h != path && Within(h, path) })
	if !inside {
		pl.plan.Rules = append(pl.plan.Rules, Rule{Path: path, Access: access, Dir: true})
		return
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return // gone, or replaced, since its parent was listed
	}
	if access&List != 0 {
		pl.plan.Rules = append(pl.plan.Rules, Rule{Path: path, Access: List, Dir: true})
	}
	pl.watch(path, fi, true)
	entries, err := os.ReadDir(path)
	if err != nil {
		return // unreadable to the user too: nothing to grant
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			continue // reached through its target, which its own rules decide
		}
		pl.cut(filepath.Join(path, e.Name()), e.IsDir(), access, hidden)
	}
}

func (pl *planner) watch(path string, fi fs.FileInfo, listed bool) {
	dev, ino := fileID(fi)
	w := Watched{Path: path, Dev: dev, Ino: ino, Listed: listed}
	if listed {
		w.MTime = fi.ModTime()
		w.Young = pl.now.Sub(w.MTime) < youngWithin
	}
	pl.plan.Watched = append(pl.plan.Watched, w)
}

// Stale reports whether the filesystem has moved since the plan was made:
// a watched directory replaced, or an entry created or removed in one.
func (pl Plan) Stale() bool {
	for _, w := range pl.Watched {
		if w.Young {
			return true
		}
		fi, err := os.Lstat(w.Path)
		if w.Missing {
			if err == nil && fi.Mode()&fs.ModeSymlink == 0 {
				return true
			}
			continue
		}
		if err != nil {
			return true
		}
		dev, ino := fileID(fi)
		if dev != w.Dev || ino != w.Ino || w.Listed && !fi.ModTime().Equal(w.MTime) {
			return true
		}
	}
	return false
}
