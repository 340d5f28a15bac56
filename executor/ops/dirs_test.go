//go:build linux || darwin

package ops

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

func dirArgs(p string, recursive *bool) protocol.DirArgs {
	return protocol.DirArgs{Path: p, Recursive: recursive}
}

func TestCreateDirRecursiveByDefault(t *testing.T) {
	dir := tempRealDir(t)
	out, _ := runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/a/b/c", nil))
	wantArm[protocol.VoidOutcome](t, out)
	st, err := os.Stat(dir + "/a/b/c")
	if err != nil || !st.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	if want := 0o777 &^ readUmask(t); st.Mode().Perm() != want {
		t.Fatalf("mode %v, want %v (0777 minus the umask)", st.Mode().Perm(), want)
	}
	// Already there: fine with recursive.
	for _, r := range []*bool{nil, boolp(true)} {
		out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/a/b/c", r))
		wantArm[protocol.VoidOutcome](t, out)
		out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/a", r))
		wantArm[protocol.VoidOutcome](t, out)
	}
	// Through a symlinked directory.
	mustSymlink(t, "a/b", dir+"/blink")
	out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/blink/x/y", nil))
	wantArm[protocol.VoidOutcome](t, out)
	if _, err := os.Stat(dir + "/a/b/x/y"); err != nil {
		t.Fatal(err)
	}
}

func TestCreateDirNotRecursive(t *testing.T) {
	dir := tempRealDir(t)
	no := boolp(false)
	out, _ := runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/one", no))
	wantArm[protocol.VoidOutcome](t, out)
	out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/one", no))
	wantFail(t, out, protocol.ErrAlreadyExists)
	out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/missing/two", no))
	wantFail(t, out, protocol.ErrNotFound)
	wantDirHolds(t, dir, "one")
}

func TestCreateDirNonDirectoryInTheWay(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/f", "", 0o644)
	out, _ := runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/f", nil))
	wantFail(t, out, protocol.ErrNotDirectory)
	out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/f/below", nil))
	wantFail(t, out, protocol.ErrNotDirectory)
	out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/f/below", boolp(false)))
	wantFail(t, out, protocol.ErrNotDirectory)
	out, _ = runFile(t, nil, protocol.KindCreateDir, dirArgs(dir+"/f", boolp(false)))
	wantFail(t, out, protocol.ErrAlreadyExists)
	wantDirHolds(t, dir, "f")
}

func TestCreateDirPermissionDenied(t *testing.T) {
	dir := traversableDir(t)
	for _, r := range []*bool{nil, boolp(false)} {
		var out protocol.Outcome
		asNobody(t, func() {
			out = File(context.Background(), &Env{}, Request{Kind: protocol.KindCreateDir, Args: dirArgs(dir+"/x/y", r)}, &fsSink{})
		})
		checkFileOutcome(t, protocol.KindCreateDir, out)
		if r == nil {
			wantFail(t, out, protocol.ErrPermissionDenied)
		} else {
			wantFail(t, out, protocol.ErrNotFound) // the parent x does not exist
		}
	}
	wantDirHolds(t, dir)
}

func TestRemove(t *testing.T) {
	dir := tempRealDir(t)
	outside := tempRealDir(t)
	mustWrite(t, outside+"/keep", "keep", 0o644)
	mustWrite(t, dir+"/f", "", 0o644)
	mustSymlink(t, outside+"/keep", dir+"/link")
	if err := os.MkdirAll(dir+"/empty", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir+"/tree/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/tree/a/b/file", "", 0o644)
	mustWrite(t, dir+"/tree/top", "", 0o644)
	mustSymlink(t, outside, dir+"/tree/a/out") // removing the tree removes the link, not what it leads to
	if err := os.Chmod(dir+"/tree/a/b", 0o500); err != nil {
		t.Fatal(err) // a read-only directory inside is still removed (root, and its parent is writable)
	}

	for _, p := range []string{"f", "link", "empty"} {
		out, _ := runFile(t, nil, protocol.KindRemove, dirArgs(dir+"/"+p, nil))
		wantArm[protocol.VoidOutcome](t, out)
	}
	if mustRead(t, outside+"/keep") != "keep" {
		t.Fatal("removing a symlink touched its target")
	}
	out, _ := runFile(t, nil, protocol.KindRemove, dirArgs(dir+"/tree", nil))
	f := wantFail(t, out, protocol.ErrInvalid)
	if !strings.Contains(f.Message, "not empty") {
		t.Fatalf("message %q", f.Message)
	}
	if _, err := os.Stat(dir + "/tree/a/b/file"); err != nil {
		t.Fatalf("a refused remove removed something: %v", err)
	}
	out, _ = runFile(t, nil, protocol.KindRemove, dirArgs(dir+"/tree", boolp(true)))
	wantArm[protocol.VoidOutcome](t, out)
	wantDirHolds(t, dir)
	wantDirHolds(t, outside, "keep")

	out, _ = runFile(t, nil, protocol.KindRemove, dirArgs(dir+"/absent", nil))
	wantFail(t, out, protocol.ErrNotFound)
	out, _ = runFile(t, nil, protocol.KindRemove, dirArgs(dir+"/absent", boolp(true)))
	wantFail(t, out, protocol.ErrNotFound)
	out, _ = runFile(t, nil, protocol.KindRemove, dirArgs("/", boolp(true)))
	wantFail(t, out, protocol.ErrInvalid)
}

func TestRemovePermissionDenied(t *testing.T) {
	dir := traversableDir(t)
	mustWrite(t, dir+"/f", "", 0o666)
	var out protocol.Outcome
	asNobody(t, func() {
		out = File(context.Background(), &Env{}, Request{Kind: protocol.KindRemove, Args: dirArgs(dir+"/f", nil)}, &fsSink{})
	})
	checkFileOutcome(t, protocol.KindRemove, out)
	wantFail(t, out, protocol.ErrPermissionDenied)
	wantDirHolds(t, dir, "f")
}

// countdownCtx cancels itself with cause the n-th time its Err is asked:
// a way to stop an op in the middle, at a point the test chooses.
type countdownCtx struct {
	context.Context
	cancel context.CancelCauseFunc
	cause  error
	n      atomic.Int32
}

func newCountdownCtx(n int32, cause error) *countdownCtx {
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &countdownCtx{Context: ctx, cancel: cancel, cause: cause}
	c.n.Store(n)
	return c
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) == 0 {
		c.cancel(c.cause)
	}
	return c.Context.Err()
}

func TestRemoveStoppedMidway(t *testing.T) {
	for _, c := range []struct {
		cause error
		check func(t *testing.T, out protocol.Outcome)
	}{
		{ErrCancelled, func(t *testing.T, out protocol.Outcome) {
			if c := wantArm[protocol.CancelledOutcome](t, out); c.State != protocol.CancelKilled {
				t.Fatalf("state %q, want killed: entries were removed", c.State)
			}
		}},
		{errTimedOut, func(t *testing.T, out protocol.Outcome) {
			// Half-done: never the retryable timeout.
			wantFail(t, out, protocol.ErrOutcomeUnknown)
		}},
	} {
		dir := tempRealDir(t)
		if err := os.MkdirAll(dir+"/tree/sub", 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			mustWrite(t, dir+"/tree/sub/f"+strconv.Itoa(i), "", 0o644)
		}
		// The tree's 42 entries are looked over once for the executor's own
		// files before anything is removed; the stop comes in the removal.
		ctx := newCountdownCtx(42+12, c.cause)
		out, _ := runFileReq(t, ctx, nil, Request{Kind: protocol.KindRemove, Args: dirArgs(dir+"/tree", boolp(true))})
		c.check(t, out)
		left := dirNames(t, dir+"/tree/sub")
		if len(left) == 0 || len(left) == 40 {
			t.Fatalf("%d of 40 entries left: the stop was not in the middle", len(left))
		}
	}
	// Stopped before the first removal: nothing happened.
	dir := tempRealDir(t)
	mustWrite(t, dir+"/f", "", 0o644)
	if err := os.Mkdir(dir+"/d", 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/d/f", "", 0o644)
	out, _ := runFileReq(t, newCountdownCtx(2, ErrCancelled), nil, Request{Kind: protocol.KindRemove, Args: dirArgs(dir+"/d", boolp(true))})
	if c := wantArm[protocol.CancelledOutcome](t, out); c.State != protocol.CancelNotStarted {
		t.Fatalf("state %q, want not_started", c.State)
	}
	out, _ = runFileReq(t, newCountdownCtx(2, errTimedOut), nil, Request{Kind: protocol.KindRemove, Args: dirArgs(dir+"/d", boolp(true))})
	wantFail(t, out, protocol.ErrTimeout)
	wantDirHolds(t, dir+"/d", "f")
}

func TestCreateTemp(t *testing.T) {
	tmp := tempRealDir(t)
	t.Setenv("TMPDIR", tmp)
	out, _ := runFile(t, nil, protocol.KindCreateTempDir, protocol.TempDirArgs{Prefix: "work-"})
	w := wantArm[protocol.WriteOutcome](t, out)
	base := filepath.Base(w.CanonicalPath)
	if filepath.Dir(w.CanonicalPath) != tmp || !strings.HasPrefix(base, "work-") || len(base) <= len("work-") {
		t.Fatalf("temp dir %q", w.CanonicalPath)
	}
	if st, err := os.Lstat(w.CanonicalPath); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("temp dir: %v %v", st, err)
	}
	if w.Created == nil || !*w.Created || w.Inode != inodeOf(t, w.CanonicalPath) {
		t.Fatalf("receipt %+v", w)
	}

	out, _ = runFile(t, nil, protocol.KindCreateTempFile, protocol.TempFileArgs{Prefix: "note-", Suffix: ".md"})
	w = wantArm[protocol.WriteOutcome](t, out)
	base = filepath.Base(w.CanonicalPath)
	if filepath.Dir(w.CanonicalPath) != tmp || !strings.HasPrefix(base, "note-") || !strings.HasSuffix(base, ".md") {
		t.Fatalf("temp file %q", w.CanonicalPath)
	}
	if st, err := os.Lstat(w.CanonicalPath); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || st.Size() != 0 {
		t.Fatalf("temp file: %v %v", st, err)
	}
	if w.Created == nil || !*w.Created || w.Inode != inodeOf(t, w.CanonicalPath) {
		t.Fatalf("receipt %+v", w)
	}

	// A "*" is an ordinary character, not a pattern.
	out, _ = runFile(t, nil, protocol.KindCreateTempFile, protocol.TempFileArgs{Prefix: "a*", Suffix: "*b"})
	if base := filepath.Base(wantArm[protocol.WriteOutcome](t, out).CanonicalPath); !strings.HasPrefix(base, "a*") || !strings.HasSuffix(base, "*b") {
		t.Fatalf("temp file %q", base)
	}
	// Two calls, two objects.
	out, _ = runFile(t, nil, protocol.KindCreateTempDir, protocol.TempDirArgs{})
	first := wantArm[protocol.WriteOutcome](t, out).CanonicalPath
	out, _ = runFile(t, nil, protocol.KindCreateTempDir, protocol.TempDirArgs{})
	if second := wantArm[protocol.WriteOutcome](t, out).CanonicalPath; first == second {
		t.Fatal("two temp dirs share a path")
	}
}

func TestCreateTempRealPathAndErrors(t *testing.T) {
	tmp := tempRealDir(t)
	links := tempRealDir(t)
	mustSymlink(t, tmp, links+"/tmplink")
	t.Setenv("TMPDIR", links+"/tmplink")
	out, _ := runFile(t, nil, protocol.KindCreateTempFile, protocol.TempFileArgs{})
	if w := wantArm[protocol.WriteOutcome](t, out); filepath.Dir(w.CanonicalPath) != tmp {
		t.Fatalf("receipt %q is not under the real %q", w.CanonicalPath, tmp)
	}
	for _, a := range []protocol.Args{protocol.TempFileArgs{Prefix: "a/b"}, protocol.TempFileArgs{Suffix: "/x"}, protocol.TempDirArgs{Prefix: "../up"}} {
		kind := protocol.KindCreateTempFile
		if _, ok := a.(protocol.TempDirArgs); ok {
			kind = protocol.KindCreateTempDir
		}
		out, _ := runFile(t, nil, kind, a)
		wantFail(t, out, protocol.ErrInvalid)
	}
	out, _ = runFile(t, nil, protocol.KindCreateTempFile, protocol.TempFileArgs{Prefix: strings.Repeat("p", 300)})
	wantFail(t, out, protocol.ErrInvalid) // name too long
	t.Setenv("TMPDIR", tmp+"/absent")
	out, _ = runFile(t, nil, protocol.KindCreateTempDir, protocol.TempDirArgs{})
	wantFail(t, out, protocol.ErrNotFound)
}
