//go:build linux || darwin

package ops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// The portable walk (walk.go) and the backend's real paths, tested directly;
// the rest of the suite runs every kind through them (TestMain).

// walkTo walks p from "/" with the portable flags and returns its real path.
func walkTo(t *testing.T, p string) (string, error) {
	t.Helper()
	fd, real, err := walkDir(unix.AT_FDCWD, "", p, portableBackend().dirFlags())
	if err != nil {
		return "", err
	}
	defer closeFD(fd)
	if err := sameObject(fd, real, unix.Lstat); err != nil {
		t.Fatalf("the walk of %s proved %q, which is not the directory it holds: %v", p, real, err)
	}
	return real, nil
}

func TestWalkFollowsEverySymlinkToTheRealPath(t *testing.T) {
	dir := tempRealDir(t)
	for _, d := range []string{"a/b/c", "x/y"} {
		if err := os.MkdirAll(dir+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustSymlink(t, "a/b", dir+"/rel")          // relative
	mustSymlink(t, dir+"/x", dir+"/abs")       // absolute
	mustSymlink(t, "../../x/y", dir+"/a/b/up") // ".." inside a target
	mustSymlink(t, "rel/c/", dir+"/chain")     // a symlink through a symlink, trailing "/"
	mustSymlink(t, ".", dir+"/self")
	for p, want := range map[string]string{
		dir + "/rel":              dir + "/a/b",
		dir + "/rel/c":            dir + "/a/b/c",
		dir + "/abs/y":            dir + "/x/y",
		dir + "/a/b/up":           dir + "/x/y",
		dir + "/rel/up":           dir + "/x/y",
		dir + "/chain":            dir + "/a/b/c",
		dir + "/self/self/rel":    dir + "/a/b",
		"/":                       "/",
		dir + "/a/b/up/../../a/b": dir + "/a/b", // not a normalized path: the walk itself does ".."
	} {
		got, err := walkTo(t, p)
		if err != nil || got != want {
			t.Errorf("walk %s: %q, %v; want %q", p, got, err, want)
		}
		if real, _ := filepath.EvalSymlinks(p); real != want {
			t.Fatalf("fixture: %s is really %s", p, real)
		}
	}
}

func TestWalkFailsAsTheKernelWould(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/f", "x", 0o644)
	mustSymlink(t, "loop2", dir+"/loop1")
	mustSymlink(t, "loop1", dir+"/loop2")
	mustSymlink(t, "nowhere", dir+"/dangling")
	mustSymlink(t, "f", dir+"/tofile")
	for p, want := range map[string]unix.Errno{
		dir + "/absent":    unix.ENOENT,
		dir + "/absent/d":  unix.ENOENT,
		dir + "/f":         unix.ENOTDIR,
		dir + "/f/d":       unix.ENOTDIR,
		dir + "/tofile":    unix.ENOTDIR,
		dir + "/dangling":  unix.ENOENT,
		dir + "/loop1":     unix.ELOOP,
		dir + "/loop1/sub": unix.ELOOP,
	} {
		if _, err := walkTo(t, p); errnoOf(err) != want {
			t.Errorf("walk %s: %v, want %v", p, err, want)
		}
	}
}

// "At most maxHops symlinks are followed, as the kernel allows 40": a chain
// of 40 resolves, one of 41 is ELOOP.
func TestWalkFollowsAtMostMaxHopsSymlinks(t *testing.T) {
	dir := tempRealDir(t)
	if err := os.Mkdir(dir+"/end", 0o755); err != nil {
		t.Fatal(err)
	}
	prev := "end"
	for i := 1; i <= maxHops+1; i++ {
		name := "l" + strconv.Itoa(i)
		mustSymlink(t, prev, dir+"/"+name)
		prev = name
	}
	if got, err := walkTo(t, dir+"/l"+strconv.Itoa(maxHops)); err != nil || got != dir+"/end" {
		t.Fatalf("a chain of %d symlinks: %q, %v", maxHops, got, err)
	}
	if _, err := walkTo(t, dir+"/l"+strconv.Itoa(maxHops+1)); errnoOf(err) != unix.ELOOP {
		t.Fatalf("a chain of %d symlinks: %v, want ELOOP", maxHops+1, err)
	}
}

// The walk is descriptor-relative: a relative name is walked from the
// directory held, whatever became of the path it was reached by.
func TestWalkFromAnOpenDirectory(t *testing.T) {
	dir := tempRealDir(t)
	if err := os.MkdirAll(dir+"/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	fd, real, err := walkDir(unix.AT_FDCWD, "", dir+"/a", portableBackend().dirFlags())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	if err := os.Rename(dir+"/a", dir+"/moved"); err != nil {
		t.Fatal(err)
	}
	nfd, nreal, err := walkDir(fd, dir+"/moved", "b", portableBackend().dirFlags())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(nfd)
	if nreal != dir+"/moved/b" || sameObject(nfd, nreal, unix.Lstat) != nil {
		t.Fatalf("walked b from the moved directory to %q", nreal)
	}
	// The path the first walk proved no longer names what it holds: the
	// check says so rather than report it.
	if err := sameObject(fd, real, unix.Lstat); !errors.Is(err, errMoved) {
		t.Fatalf("a moved directory's old path passed the check: %v", err)
	}
	if _, err := fsys.realPath(fd, real); err == nil && fsys.name() == "portable" {
		t.Fatal("the portable backend reported the old path of a moved directory")
	}
}

// Directories on the way need search permission only, as with the kernel's
// own resolution: the walk holds them O_PATH (Linux) or O_SEARCH (darwin),
// never opened for reading.
func TestWalkNeedsOnlySearchPermission(t *testing.T) {
	dir := traversableDir(t)
	if err := os.Mkdir(dir+"/x", 0o711); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/x/f", "through a search-only directory", 0o644)
	if err := os.Chmod(dir+"/x", 0o111); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir+"/x", 0o755) })
	var out protocol.Outcome
	sink := &fsSink{}
	asNobody(t, func() {
		out = File(context.Background(), &Env{AllowedRoots: []string{dir}}, Request{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: dir + "/x/f"}}, sink)
	})
	wantArm[protocol.ReadOutcome](t, out)
	if got := string(sink.content()); got != "through a search-only directory" {
		t.Fatalf("read %q", got)
	}
}

// linkNoReplace, the create-if-absent of every platform: it never replaces,
// and on success the old name is gone.
func TestLinkNoReplaceNeverReplaces(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/from", "new", 0o600)
	mustWrite(t, dir+"/taken", "old", 0o600)
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if err := linkNoReplace(dfd, "from", "taken"); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("onto a taken name: %v, want EEXIST", err)
	}
	if mustRead(t, dir+"/taken") != "old" {
		t.Fatal("the taken name was replaced")
	}
	if err := linkNoReplace(dfd, "from", "free"); err != nil {
		t.Fatal(err)
	}
	wantDirHolds(t, dir, "free", "taken")
}
