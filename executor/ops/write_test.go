//go:build linux || darwin

package ops

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

func TestWriteFileCreates(t *testing.T) {
	dir := tempRealDir(t)
	p := dir + "/new.txt"
	out := writeVia(t, nil, protocol.KindWriteFile, p, []byte("hello, world"))
	w := wantArm[protocol.WriteOutcome](t, out)
	if w.CanonicalPath != p || w.Created == nil || !*w.Created || w.Inode != inodeOf(t, p) {
		t.Fatalf("receipt %+v (created %v), want %s created with inode %s", w, w.Created, p, inodeOf(t, p))
	}
	if got := mustRead(t, p); got != "hello, world" {
		t.Fatalf("content %q", got)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o644 &^ readUmask(t); st.Mode().Perm() != want {
		t.Fatalf("a new file has mode %v, want %v (0644 minus the umask)", st.Mode().Perm(), want)
	}
	wantDirHolds(t, dir, "new.txt")
}

func TestWriteFileEmptyContent(t *testing.T) {
	dir := tempRealDir(t)
	out := writeVia(t, nil, protocol.KindWriteFile, dir+"/empty", nil)
	wantArm[protocol.WriteOutcome](t, out)
	if got := mustRead(t, dir+"/empty"); got != "" {
		t.Fatalf("content %q", got)
	}
	wantDirHolds(t, dir, "empty")
}

func TestWriteFileOverwriteKeepsMode(t *testing.T) {
	dir := tempRealDir(t)
	p := dir + "/f"
	mustWrite(t, p, "old content that is longer", 0o640)
	before := inodeOf(t, p)
	out := writeVia(t, nil, protocol.KindWriteFile, p, []byte("new"))
	w := wantArm[protocol.WriteOutcome](t, out)
	if w.Created == nil || *w.Created {
		t.Fatalf("created = %v, want false for an overwrite", w.Created)
	}
	if w.Inode != inodeOf(t, p) || w.Inode == before {
		t.Fatalf("receipt inode %s; the file's is %s, the old one's was %s", w.Inode, inodeOf(t, p), before)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v after overwrite, want 0640 kept", st.Mode().Perm())
	}
	if got := mustRead(t, p); got != "new" {
		t.Fatalf("content %q", got)
	}
	wantDirHolds(t, dir, "f")
}

// A final symlink is followed: the file written is the one the path leads
// to, the link stays a link, and the receipt names the real file.
func TestWriteFileThroughSymlinks(t *testing.T) {
	dir := tempRealDir(t)
	if err := os.Mkdir(dir+"/real", 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/real/target", "old", 0o600)
	mustSymlink(t, "real/target", dir+"/link")
	mustSymlink(t, "real", dir+"/dirlink")
	mustSymlink(t, dir+"/real/created-by-write", dir+"/dangling")

	w := wantArm[protocol.WriteOutcome](t, writeVia(t, nil, protocol.KindWriteFile, dir+"/link", []byte("via link")))
	if w.CanonicalPath != dir+"/real/target" || *w.Created {
		t.Fatalf("receipt %+v, want the real target, not created", w)
	}
	if fi, err := os.Lstat(dir + "/link"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if got := mustRead(t, dir+"/real/target"); got != "via link" {
		t.Fatalf("target holds %q", got)
	}
	if st, _ := os.Stat(dir + "/real/target"); st.Mode().Perm() != 0o600 {
		t.Fatalf("the target's mode became %v", st.Mode().Perm())
	}

	w = wantArm[protocol.WriteOutcome](t, writeVia(t, nil, protocol.KindWriteFile, dir+"/dirlink/other", []byte("x")))
	if w.CanonicalPath != dir+"/real/other" || !*w.Created {
		t.Fatalf("receipt %+v, want %s/real/other created", w, dir)
	}

	w = wantArm[protocol.WriteOutcome](t, writeVia(t, nil, protocol.KindWriteFile, dir+"/dangling", []byte("y")))
	if w.CanonicalPath != dir+"/real/created-by-write" || !*w.Created {
		t.Fatalf("receipt %+v, want the dangling link's target created", w)
	}
	wantDirHolds(t, dir+"/real", "created-by-write", "other", "target")
	wantDirHolds(t, dir, "dangling", "dirlink", "link", "real")
}

func TestWriteErrors(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/file", "x", 0o644)
	if err := os.Mkdir(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "sub", dir+"/sublink")
	for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindAppendFile} {
		for _, c := range []struct {
			path string
			code protocol.ErrorCode
		}{
			{dir + "/absent/f", protocol.ErrNotFound},
			{dir + "/file/f", protocol.ErrNotDirectory},
			{dir + "/sub", protocol.ErrIsDirectory},
			{dir + "/sublink", protocol.ErrIsDirectory},
			{"/", protocol.ErrIsDirectory},
		} {
			f := wantFail(t, writeVia(t, nil, kind, c.path, []byte("data")), c.code)
			if !strings.Contains(f.Message, c.path) {
				t.Errorf("%s %s: message %q does not name the path", kind, c.path, f.Message)
			}
		}
	}
	if err := unix.Mkfifo(dir+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindAppendFile} {
		wantFail(t, writeVia(t, nil, kind, dir+"/fifo", []byte("data")), protocol.ErrInvalid) // never opened: it would block
	}
	wantDirHolds(t, dir, "fifo", "file", "sub", "sublink")
	wantDirHolds(t, dir+"/sub")
	if got := mustRead(t, dir+"/file"); got != "x" {
		t.Fatalf("file holds %q", got)
	}
}

func TestWritePermissionDenied(t *testing.T) {
	dir := traversableDir(t) // root's, 0755: nobody may not create in it
	mustWrite(t, dir+"/readonly", "keep", 0o644)
	for _, c := range []struct {
		kind protocol.InstructionKind
		path string
	}{
		{protocol.KindWriteFile, dir + "/new"},
		{protocol.KindWriteFile, dir + "/readonly"},
		{protocol.KindWriteFileExclusive, dir + "/new"},
		{protocol.KindAppendFile, dir + "/readonly"},
	} {
		var out protocol.Outcome
		asNobody(t, func() {
			out = File(context.Background(), &Env{}, Request{
				Kind: c.kind, Args: writeArgs(c.path, []byte("data")), Payload: feedFrames(payloadFrames([]byte("data"), 2)),
			}, &fsSink{})
		})
		checkFileOutcome(t, c.kind, out)
		wantFail(t, out, protocol.ErrPermissionDenied)
	}
	wantDirHolds(t, dir, "readonly")
	if got := mustRead(t, dir+"/readonly"); got != "keep" {
		t.Fatalf("readonly holds %q", got)
	}
}

func TestWriteArgsChecked(t *testing.T) {
	dir := tempRealDir(t)
	a := writeArgs(dir+"/f", []byte("x"))
	a.ContentLen = -1
	out, _ := runFileReq(t, context.Background(), nil, Request{Kind: protocol.KindWriteFile, Args: a, Payload: feedFrames(nil)})
	wantFail(t, out, protocol.ErrInvalid)
	out, _ = runFileReq(t, context.Background(), nil, Request{Kind: protocol.KindWriteFile, Args: writeArgs(dir+"/f", []byte("x"))})
	wantFail(t, out, protocol.ErrUnknown) // no payload stream: a runtime bug, said so
	wantDirHolds(t, dir)
}

func TestWriteFileExclusive(t *testing.T) {
	dir := tempRealDir(t)
	w := wantArm[protocol.WriteOutcome](t, writeVia(t, nil, protocol.KindWriteFileExclusive, dir+"/f", []byte("first")))
	if w.CanonicalPath != dir+"/f" || w.Created == nil || !*w.Created || w.Inode != inodeOf(t, dir+"/f") {
		t.Fatalf("receipt %+v", w)
	}
	wantFail(t, writeVia(t, nil, protocol.KindWriteFileExclusive, dir+"/f", []byte("second")), protocol.ErrAlreadyExists)
	if got := mustRead(t, dir+"/f"); got != "first" {
		t.Fatalf("content %q", got)
	}
	// Anything at the name counts, a dangling symlink included: it is never
	// written through.
	mustSymlink(t, "nowhere", dir+"/dangling")
	wantFail(t, writeVia(t, nil, protocol.KindWriteFileExclusive, dir+"/dangling", []byte("x")), protocol.ErrAlreadyExists)
	if err := os.Mkdir(dir+"/d", 0o755); err != nil {
		t.Fatal(err)
	}
	wantFail(t, writeVia(t, nil, protocol.KindWriteFileExclusive, dir+"/d", []byte("x")), protocol.ErrAlreadyExists)
	wantDirHolds(t, dir, "d", "dangling", "f")
}

// Many exclusive writes race for one name: exactly one wins, every other
// answers already_exists, and the file holds the winner's whole content.
func TestWriteFileExclusiveRace(t *testing.T) {
	dir := tempRealDir(t)
	p := dir + "/contested"
	const writers = 16
	contents := make([][]byte, writers)
	outs := make([]protocol.Outcome, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i)
		wg.Go(func() {
			<-start
			outs[i] = File(context.Background(), &Env{}, Request{
				InstructionID: "01TEST", Kind: protocol.KindWriteFileExclusive, Args: writeArgs(p, contents[i]),
				Payload: feedFrames(payloadFrames(contents[i], 4096)),
			}, &fsSink{})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, out := range outs {
		checkFileOutcome(t, protocol.KindWriteFileExclusive, out)
		switch o := out.(type) {
		case protocol.WriteOutcome:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won", winner, i)
			}
			winner = i
			if o.Inode != inodeOf(t, p) {
				t.Fatalf("the winner's receipt names inode %s, the file is %s", o.Inode, inodeOf(t, p))
			}
		case protocol.Failure:
			if o.ErrorCode != protocol.ErrAlreadyExists {
				t.Fatalf("writer %d: %s", i, o)
			}
		default:
			t.Fatalf("writer %d: %#v", i, out)
		}
	}
	if winner < 0 {
		t.Fatal("nobody won")
	}
	if got := mustRead(t, p); got != string(contents[winner]) {
		t.Fatalf("the file holds %d bytes that are not writer %d's whole content", len(got), winner)
	}
	wantDirHolds(t, dir, "contested")
}

func TestAppendFile(t *testing.T) {
	dir := tempRealDir(t)
	p := dir + "/log"
	mustWrite(t, p, "line 1\n", 0o640)
	wantArm[protocol.VoidOutcome](t, writeVia(t, nil, protocol.KindAppendFile, p, []byte("line 2\nline 3\n")))
	if got := mustRead(t, p); got != "line 1\nline 2\nline 3\n" {
		t.Fatalf("content %q", got)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640 kept", st.Mode().Perm())
	}
	// Absent: created, like Node's fs.appendFile.
	wantArm[protocol.VoidOutcome](t, writeVia(t, nil, protocol.KindAppendFile, dir+"/new", []byte("first")))
	if got := mustRead(t, dir+"/new"); got != "first" {
		t.Fatalf("content %q", got)
	}
	if st, _ := os.Stat(dir + "/new"); st.Mode().Perm() != 0o644&^readUmask(t) {
		t.Fatalf("a created file has mode %v", st.Mode().Perm())
	}
	// Through a symlink: the target grows, the link stays.
	mustSymlink(t, "log", dir+"/loglink")
	wantArm[protocol.VoidOutcome](t, writeVia(t, nil, protocol.KindAppendFile, dir+"/loglink", []byte("line 4\n")))
	if got := mustRead(t, p); got != "line 1\nline 2\nline 3\nline 4\n" {
		t.Fatalf("content %q", got)
	}
	// Empty content creates nothing new in an existing file.
	wantArm[protocol.VoidOutcome](t, writeVia(t, nil, protocol.KindAppendFile, p, nil))
	wantDirHolds(t, dir, "log", "loglink", "new")
}

// appendFile does not need a writable directory, only a writable file.
func TestAppendFileInReadOnlyDirectory(t *testing.T) {
	dir := traversableDir(t)
	mustWrite(t, dir+"/shared.log", "a\n", 0o666)
	var out protocol.Outcome
	asNobody(t, func() {
		out = File(context.Background(), &Env{}, Request{
			Kind: protocol.KindAppendFile, Args: writeArgs(dir+"/shared.log", []byte("b\n")), Payload: feedFrames(payloadFrames([]byte("b\n"), 1)),
		}, &fsSink{})
	})
	wantArm[protocol.VoidOutcome](t, out)
	if got := mustRead(t, dir+"/shared.log"); got != "a\nb\n" {
		t.Fatalf("content %q", got)
	}
}

// An append that the kernel cuts short cannot be taken back: the answer is
// outcome_unknown (never retried upstream, a retry would append twice), with
// the counts. The file size limit (RLIMIT_FSIZE) makes the kernel write only
// what fits; Go ignores the SIGXFSZ that comes with it.
func TestAppendFileCutShort(t *testing.T) {
	dir := tempRealDir(t)
	p := dir + "/log"
	base := bytes.Repeat([]byte("."), 1<<20)
	if err := os.WriteFile(p, base, 0o644); err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limit := unix.Rlimit{Cur: uint64(len(base)) + 10, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &limit); err != nil {
		t.Skipf("cannot set RLIMIT_FSIZE: %v", err)
	}
	out := writeVia(t, nil, protocol.KindAppendFile, p, []byte("0123456789abcdefghij"))
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	f := wantFail(t, out, protocol.ErrOutcomeUnknown)
	if !strings.Contains(f.Message, "10 of 20 bytes") {
		t.Fatalf("message %q", f.Message)
	}
	if got := mustRead(t, p); got != string(base)+"0123456789" {
		t.Fatalf("the file ends with %q", got[len(base):])
	}
}
