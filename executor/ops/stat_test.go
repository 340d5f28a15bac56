//go:build linux || darwin

package ops

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

func TestFileInfo(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/f", "12345", 0o640)
	mtime := time.Date(2024, 2, 3, 4, 5, 6, 789_000_000, time.UTC)
	if err := os.Chtimes(dir+"/f", mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir+"/d", 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir+"/d", 0o751|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "f", dir+"/l")
	if err := unix.Mkfifo(dir+"/p", 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		kind protocol.FileKind
		mode uint32
		size int64
	}{
		{"f", protocol.FileKindFile, unix.S_IFREG | 0o640, 5},
		{"d", protocol.FileKindDir, unix.S_IFDIR | unix.S_ISVTX | 0o751, -1},
		{"l", protocol.FileKindSymlink, unix.S_IFLNK | 0o777, 1}, // lstat: the link itself, its size the target's length
		{"p", protocol.FileKindOther, unix.S_IFIFO | 0o600, 0},
	} {
		out, _ := runFile(t, nil, protocol.KindFileInfo, protocol.PathArgs{Path: dir + "/" + c.name})
		info := wantArm[protocol.StatOutcome](t, out).Info
		if info.Path != dir+"/"+c.name || info.Kind != c.kind || info.Mode == nil || *info.Mode != c.mode || (c.size >= 0 && info.Size != c.size) {
			t.Errorf("%s: %+v (mode %o), want kind %s mode %o size %d", c.name, info, *info.Mode, c.kind, c.mode, c.size)
		}
	}
	out, _ := runFile(t, nil, protocol.KindFileInfo, protocol.PathArgs{Path: dir + "/f"})
	if got := wantArm[protocol.StatOutcome](t, out).Info.MtimeMs; got != mtime.UnixMilli() {
		t.Errorf("mtimeMs %d, want %d", got, mtime.UnixMilli())
	}
	wantFail(t, runFileOut(t, protocol.KindFileInfo, dir+"/absent"), protocol.ErrNotFound)
	wantFail(t, runFileOut(t, protocol.KindFileInfo, dir+"/absent/x"), protocol.ErrNotFound)
	wantFail(t, runFileOut(t, protocol.KindFileInfo, dir+"/f/x"), protocol.ErrNotDirectory)
	root := wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindFileInfo, "/")).Info
	if root.Kind != protocol.FileKindDir || root.Path != "/" {
		t.Errorf("fileInfo / = %+v", root)
	}
}

// runFileOut runs a PathArgs kind on p and returns the outcome.
func runFileOut(t *testing.T, kind protocol.InstructionKind, p string) protocol.Outcome {
	t.Helper()
	out, _ := runFile(t, nil, kind, protocol.PathArgs{Path: p})
	return out
}

func TestListDir(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/b", "bb", 0o644)
	mustWrite(t, dir+"/a", "a", 0o600)
	if err := os.Mkdir(dir+"/c", 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "/nowhere", dir+"/d")
	mustSymlink(t, ".", dir+"/self")
	es := wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindListDir, dir)).Entries
	want := []struct {
		name string
		kind protocol.FileKind
	}{{"a", protocol.FileKindFile}, {"b", protocol.FileKindFile}, {"c", protocol.FileKindDir}, {"d", protocol.FileKindSymlink}, {"self", protocol.FileKindSymlink}}
	if len(es) != len(want) {
		t.Fatalf("%d entries: %+v", len(es), es)
	}
	for i, w := range want {
		if es[i].Path != dir+"/"+w.name || es[i].Kind != w.kind {
			t.Errorf("entry %d = %+v, want %s/%s a %s", i, es[i], dir, w.name, w.kind)
		}
	}
	if es[1].Size != 2 || *es[0].Mode != unix.S_IFREG|0o600 {
		t.Errorf("entry facts: %+v %+v", es[0], es[1])
	}

	// Through a symlink to the directory: paths stay under the requested path.
	es = wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindListDir, dir+"/self")).Entries
	if len(es) != len(want) || es[0].Path != dir+"/self/a" {
		t.Errorf("listing through a symlink: %+v", es)
	}

	wantFail(t, runFileOut(t, protocol.KindListDir, dir+"/a"), protocol.ErrNotDirectory)
	wantFail(t, runFileOut(t, protocol.KindListDir, dir+"/absent"), protocol.ErrNotFound)
	wantFail(t, runFileOut(t, protocol.KindListDir, dir+"/d"), protocol.ErrNotFound)
}

func TestListDirEmpty(t *testing.T) {
	out := runFileOut(t, protocol.KindListDir, tempRealDir(t))
	st := wantArm[protocol.StatOutcome](t, out)
	if st.Entries == nil || len(st.Entries) != 0 {
		t.Fatalf("entries %#v, want a non-nil empty slice", st.Entries)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"entries":[]`) {
		t.Fatalf("the wire form %s lacks an empty entries array", b)
	}
}

func TestListDirRoot(t *testing.T) {
	es := wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindListDir, "/")).Entries
	for _, e := range es {
		if !strings.HasPrefix(e.Path, "/") || strings.HasPrefix(e.Path, "//") {
			t.Fatalf("entry path %q", e.Path)
		}
	}
}

func TestListDirTooLargeForOneFrame(t *testing.T) {
	if listBudget >= protocol.MaxFrameBytes-1024 {
		t.Fatalf("listBudget %d leaves no room for the result frame's envelope", listBudget)
	}
	defer func(b int) { listBudget = b }(listBudget)
	listBudget = 16 << 10 // the logic, without creating thousands of files
	dir := tempRealDir(t)
	long := strings.Repeat("n", 200)
	for i := range 100 {
		f, err := os.Create(dir + "/" + long + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	f := wantFail(t, runFileOut(t, protocol.KindListDir, dir), protocol.ErrInvalid)
	if !strings.Contains(f.Message, "result frame") {
		t.Fatalf("message %q", f.Message)
	}
}

func TestNamesThatAreNotUTF8(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/bad\xffname", "", 0o644)
	wantFail(t, runFileOut(t, protocol.KindListDir, dir), protocol.ErrInvalid)
	mustSymlink(t, "target\xfe", dir+"/link")
	wantFail(t, runFileOut(t, protocol.KindReadLink, dir+"/link"), protocol.ErrInvalid)
}

func TestExists(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/f", "", 0o644)
	mustSymlink(t, "nowhere", dir+"/dangling")
	mustSymlink(t, "f", dir+"/link")
	for _, c := range []struct {
		path string
		want bool
	}{
		{dir + "/f", true},
		{dir, true},
		{"/", true},
		{dir + "/link", true},
		{dir + "/dangling", true}, // lstat: the link is there
		{dir + "/absent", false},
		{dir + "/absent/deeper", false},
		{dir + "/f/below-a-file", false},
	} {
		st := wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindExists, c.path))
		if st.ExistsValue == nil || *st.ExistsValue != c.want {
			t.Errorf("exists %s = %v, want %v", c.path, st.ExistsValue, c.want)
		}
	}
	b, _ := json.Marshal(runFileOut(t, protocol.KindExists, dir+"/absent"))
	if !strings.Contains(string(b), `"existsValue":false`) {
		t.Fatalf("false is omitted on the wire: %s", b)
	}
}

// A parent that cannot be searched is a failure, never a false.
func TestExistsPermissionDenied(t *testing.T) {
	dir := traversableDir(t)
	if err := os.Mkdir(dir+"/closed", 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/closed/f", "", 0o644)
	for _, p := range []string{dir + "/closed/f", dir + "/closed/absent"} {
		var out protocol.Outcome
		asNobody(t, func() {
			out = File(context.Background(), &Env{}, Request{Kind: protocol.KindExists, Args: protocol.PathArgs{Path: p}}, &fsSink{})
		})
		checkFileOutcome(t, protocol.KindExists, out)
		wantFail(t, out, protocol.ErrPermissionDenied)
	}
}

func TestCanonicalPath(t *testing.T) {
	dir := tempRealDir(t)
	if err := os.MkdirAll(dir+"/real/deep/er", 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/real/deep/file", "", 0o644)
	// A chain: hop1 -> hop2 (absolute) -> real/deep/er/.. (relative, with ..)
	mustSymlink(t, "real/deep/er/..", dir+"/hop3")
	mustSymlink(t, dir+"/hop3", dir+"/hop2")
	mustSymlink(t, "hop2", dir+"/hop1")
	// A symlink whose target climbs out through a symlinked directory: ".."
	// applies to the real parent, not the lexical one.
	mustSymlink(t, "real/deep/er", dir+"/erlink")
	mustSymlink(t, "erlink/../file", dir+"/climb")
	mustSymlink(t, "missing", dir+"/dangling")
	for _, c := range []struct{ path, want string }{
		{dir + "/hop1/file", dir + "/real/deep/file"},
		{dir + "/hop1", dir + "/real/deep"},
		{dir + "/climb", dir + "/real/deep/file"},
		{dir + "/real/deep/file", dir + "/real/deep/file"},
		{"/", "/"},
	} {
		st := wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindCanonicalPath, c.path))
		if st.CanonicalPath != c.want {
			t.Errorf("canonicalPath %s = %q, want %q", c.path, st.CanonicalPath, c.want)
		}
	}
	wantFail(t, runFileOut(t, protocol.KindCanonicalPath, dir+"/absent"), protocol.ErrNotFound)
	wantFail(t, runFileOut(t, protocol.KindCanonicalPath, dir+"/dangling"), protocol.ErrNotFound)
	wantFail(t, runFileOut(t, protocol.KindCanonicalPath, dir+"/real/deep/file/x"), protocol.ErrNotDirectory)
}

func TestReadLink(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/f", "", 0o644)
	mustSymlink(t, "../relative/target", dir+"/rel")
	mustSymlink(t, "/abs/target", dir+"/abs")
	mustSymlink(t, "rel", dir+"/chain")
	for _, c := range []struct{ path, want string }{
		{dir + "/rel", "../relative/target"}, // as stored, never resolved
		{dir + "/abs", "/abs/target"},
		{dir + "/chain", "rel"}, // one hop
	} {
		lt := wantArm[protocol.StatOutcome](t, runFileOut(t, protocol.KindReadLink, c.path)).LinkTarget
		if lt == nil || !lt.IsSymlink || lt.Target != c.want {
			t.Errorf("readLink %s = %+v, want %q", c.path, lt, c.want)
		}
	}
	for _, p := range []string{dir + "/f", dir, "/"} {
		out := runFileOut(t, protocol.KindReadLink, p)
		lt := wantArm[protocol.StatOutcome](t, out).LinkTarget
		if lt == nil || lt.IsSymlink {
			t.Errorf("readLink of the non-symlink %s = %+v, want null", p, lt)
		}
		if b, _ := json.Marshal(out); !strings.Contains(string(b), `"linkTarget":null`) {
			t.Errorf("wire form %s", b)
		}
	}
	wantFail(t, runFileOut(t, protocol.KindReadLink, dir+"/absent"), protocol.ErrNotFound)
}

func TestStatPermissionDenied(t *testing.T) {
	dir := traversableDir(t)
	if err := os.Mkdir(dir+"/closed", 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/closed/f", "", 0o644)
	for _, c := range []struct {
		kind protocol.InstructionKind
		path string
	}{
		{protocol.KindFileInfo, dir + "/closed/f"},
		{protocol.KindReadLink, dir + "/closed/f"},
		{protocol.KindCanonicalPath, dir + "/closed/f"},
		{protocol.KindListDir, dir + "/closed"},
	} {
		var out protocol.Outcome
		asNobody(t, func() {
			out = File(context.Background(), &Env{}, Request{Kind: c.kind, Args: protocol.PathArgs{Path: c.path}}, &fsSink{})
		})
		checkFileOutcome(t, c.kind, out)
		wantFail(t, out, protocol.ErrPermissionDenied)
	}
}
