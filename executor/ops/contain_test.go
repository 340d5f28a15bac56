//go:build linux || darwin

package ops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// containFixture: a root the policy serves and a directory outside it,
// with every kind of way out of the root.
type containFixture struct {
	root, outside string
	env           *Env
}

func newContainFixture(t *testing.T) containFixture {
	t.Helper()
	f := containFixture{root: tempRealDir(t), outside: tempRealDir(t)}
	f.env = &Env{AllowedRoots: []string{f.root}}
	mustWrite(t, f.outside+"/secret", "secret", 0o644)
	if err := os.Mkdir(f.outside+"/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.root+"/inside", "inside", 0o644)
	if err := os.Mkdir(f.root+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, f.outside+"/secret", f.root+"/esc") // a symlink escape
	mustSymlink(t, f.outside, f.root+"/escdir")        // a symlinked directory escape
	mustSymlink(t, "../..", f.root+"/sub/up")          // a ".." escape: sub/up/.. leaves the root
	mustSymlink(t, "../inside", f.root+"/sub/back")    // ".." that stays inside
	mustSymlink(t, f.outside+"/nowhere", f.root+"/esc-dangling")
	return f
}

// refused asserts a permission_denied that says it is the containment policy.
func refused(t *testing.T, out protocol.Outcome) {
	t.Helper()
	f := wantFail(t, out, protocol.ErrPermissionDenied)
	if !strings.Contains(f.Message, "outside every allowed root") {
		t.Fatalf("the refusal does not say why: %q", f.Message)
	}
}

func TestContainmentRefusesEscapes(t *testing.T) {
	fx := newContainFixture(t)
	// root and outside are siblings (two t.TempDirs of one test): sub/up
	// leads to their parent, and from there into outside.
	up := fx.root + "/sub/up/" + filepath.Base(fx.outside)
	escapes := []string{
		fx.root + "/esc",            // symlink to a file outside
		fx.root + "/escdir/secret",  // through a symlinked directory
		up + "/secret",              // through ".."
		fx.outside + "/secret",      // plainly outside
		fx.outside + "/absent",      // outside and absent: refused, not not_found
		fx.outside + "/absent/deep", // outside, absent parent
	}
	if got := mustRead(t, up+"/secret"); got != "secret" {
		t.Fatalf("fixture: %s does not lead to the secret", up)
	}
	for _, p := range escapes {
		for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile, protocol.KindCanonicalPath} {
			out, sink := runFile(t, fx.env, kind, protocol.PathArgs{Path: p})
			refused(t, out)
			if len(sink.chunks) != 0 {
				t.Fatalf("%s %s sent content", kind, p)
			}
		}
		out, _ := runFile(t, fx.env, protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: p})
		refused(t, out)
		for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindAppendFile} {
			refused(t, writeVia(t, fx.env, kind, p, []byte("overwritten")))
		}
	}
	// The plainly-outside paths, for the kinds that look at the name itself.
	for _, p := range []string{fx.outside + "/secret", fx.outside + "/absent", fx.outside + "/absent/deep", fx.root + "/escdir/secret", up + "/secret"} {
		for _, kind := range []protocol.InstructionKind{protocol.KindFileInfo, protocol.KindExists, protocol.KindReadLink} {
			out, _ := runFile(t, fx.env, kind, protocol.PathArgs{Path: p})
			refused(t, out)
		}
		out, _ := runFile(t, fx.env, protocol.KindRemove, dirArgs(p, boolp(true)))
		refused(t, out)
		refused(t, writeVia(t, fx.env, protocol.KindWriteFileExclusive, p+"-new", []byte("x")))
	}
	for _, p := range []string{fx.outside, fx.root + "/escdir", up} {
		out, _ := runFile(t, fx.env, protocol.KindListDir, protocol.PathArgs{Path: p})
		refused(t, out)
	}
	for _, p := range []string{fx.root + "/escdir/new", fx.outside + "/new/deeper", up + "/new"} {
		for _, r := range []*bool{nil, boolp(false)} {
			out, _ := runFile(t, fx.env, protocol.KindCreateDir, dirArgs(p, r))
			refused(t, out)
		}
	}
	// Writing through a dangling symlink that leads outside.
	refused(t, writeVia(t, fx.env, protocol.KindWriteFile, fx.root+"/esc-dangling", []byte("x")))

	// Nothing outside changed.
	wantDirHolds(t, fx.outside, "dir", "secret")
	wantDirHolds(t, fx.outside+"/dir")
	if got := mustRead(t, fx.outside+"/secret"); got != "secret" {
		t.Fatalf("the secret became %q", got)
	}
	wantDirHolds(t, fx.root, "esc", "esc-dangling", "escdir", "inside", "sub")
}

func TestContainmentAllowsInside(t *testing.T) {
	fx := newContainFixture(t)
	out, sink := runFile(t, fx.env, protocol.KindReadTextFile, protocol.PathArgs{Path: fx.root + "/sub/back"})
	wantArm[protocol.ReadOutcome](t, out)
	if string(sink.content()) != "inside" {
		t.Fatalf("content %q", sink.content())
	}
	// The names inside the root are answerable, even when they lead out:
	// lstat, exists and readLink look at the link itself, and removing the
	// link removes only the link.
	for _, kind := range []protocol.InstructionKind{protocol.KindFileInfo, protocol.KindExists, protocol.KindReadLink} {
		out, _ := runFile(t, fx.env, kind, protocol.PathArgs{Path: fx.root + "/esc"})
		wantArm[protocol.StatOutcome](t, out)
	}
	wantArm[protocol.WriteOutcome](t, writeVia(t, fx.env, protocol.KindWriteFile, fx.root+"/sub/new", []byte("ok")))
	wantArm[protocol.WriteOutcome](t, writeVia(t, fx.env, protocol.KindWriteFileExclusive, fx.root+"/sub/excl", []byte("ok")))
	wantArm[protocol.VoidOutcome](t, writeVia(t, fx.env, protocol.KindAppendFile, fx.root+"/sub/new", []byte("!")))
	out, _ = runFile(t, fx.env, protocol.KindCreateDir, dirArgs(fx.root+"/a/b", nil))
	wantArm[protocol.VoidOutcome](t, out)
	out, _ = runFile(t, fx.env, protocol.KindListDir, protocol.PathArgs{Path: fx.root})
	wantArm[protocol.StatOutcome](t, out)
	out, _ = runFile(t, fx.env, protocol.KindRemove, dirArgs(fx.root+"/esc", nil))
	wantArm[protocol.VoidOutcome](t, out)
	if got := mustRead(t, fx.outside+"/secret"); got != "secret" {
		t.Fatalf("the secret became %q", got)
	}
	// Absent inside: not_found, as without a policy.
	out, _ = runFile(t, fx.env, protocol.KindReadTextFile, protocol.PathArgs{Path: fx.root + "/absent"})
	wantFail(t, out, protocol.ErrNotFound)
}

// A root given through a symlink contains what its target contains.
func TestContainmentRootThroughSymlink(t *testing.T) {
	real := tempRealDir(t)
	mustWrite(t, real+"/f", "x", 0o644)
	link := tempRealDir(t) + "/rootlink"
	mustSymlink(t, real, link)
	env := &Env{AllowedRoots: []string{link}}
	out, _ := runFile(t, env, protocol.KindReadTextFile, protocol.PathArgs{Path: real + "/f"})
	wantArm[protocol.ReadOutcome](t, out)
	out, _ = runFile(t, env, protocol.KindReadTextFile, protocol.PathArgs{Path: link + "/f"})
	wantArm[protocol.ReadOutcome](t, out)
	// A relative root contains nothing: it would need a base.
	out, _ = runFile(t, &Env{AllowedRoots: []string{"relative"}}, protocol.KindExists, protocol.PathArgs{Path: real + "/f"})
	refused(t, out)
}

func TestContainmentTempObjects(t *testing.T) {
	fx := newContainFixture(t)
	t.Setenv("TMPDIR", fx.outside)
	out, _ := runFile(t, fx.env, protocol.KindCreateTempFile, protocol.TempFileArgs{})
	refused(t, out)
	out, _ = runFile(t, fx.env, protocol.KindCreateTempDir, protocol.TempDirArgs{})
	refused(t, out)
	wantDirHolds(t, fx.outside, "dir", "secret")
	t.Setenv("TMPDIR", fx.root+"/sub")
	out, _ = runFile(t, fx.env, protocol.KindCreateTempFile, protocol.TempFileArgs{})
	wantArm[protocol.WriteOutcome](t, out)
}

func TestCodeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		code protocol.ErrorCode
	}{
		{os.ErrNotExist, protocol.ErrUnknown}, // not an errno: unknown, never guessed
		{&os.PathError{Op: "open", Path: "/x", Err: errno(2)}, protocol.ErrNotFound},
		{errno(21), protocol.ErrIsDirectory},
		{errno(20), protocol.ErrNotDirectory},
		{errno(13), protocol.ErrPermissionDenied},
		{errno(1), protocol.ErrPermissionDenied},
		{errno(30), protocol.ErrPermissionDenied},
		{errno(17), protocol.ErrAlreadyExists},
		{errno(36), protocol.ErrInvalid},
		{errno(28), protocol.ErrUnknown},
	} {
		if got := codeOf(c.err); got != c.code {
			t.Errorf("codeOf(%v) = %s, want %s", c.err, got, c.code)
		}
	}
	f := osFailure("read", "/a/b", &os.PathError{Op: "open", Path: "/a/b", Err: errno(2)})
	if f.Message != `cannot read "/a/b": no such file or directory` {
		t.Errorf("message %q", f.Message)
	}
	if m := failf(protocol.ErrUnknown, "bad \xff byte").Message; m != "bad \uFFFD byte" {
		t.Errorf("message %q is not valid UTF-8", m)
	}
}

func TestInterruptedOutcomes(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errTimedOut)
	r := Request{Kind: protocol.KindCreateDir, Args: protocol.DirArgs{Path: "/a/b"}, Timeout: time.Second}
	f := wantFail(t, interrupted(ctx, r, true, false), protocol.ErrTimeout)
	if !strings.Contains(f.Message, `createDir "/a/b"`) {
		t.Errorf("message %q does not name the instruction", f.Message)
	}
	wantFail(t, interrupted(ctx, r, true, true), protocol.ErrOutcomeUnknown) // half-done: never the retryable timeout
	ctx, cancel = context.WithCancelCause(context.Background())
	cancel(errors.New("fenced"))
	f = wantFail(t, interrupted(ctx, r, true, true), protocol.ErrAborted)
	if !strings.Contains(f.Message, "partly done") || !strings.Contains(f.Message, "fenced") {
		t.Errorf("message %q", f.Message)
	}
}

func errno(n int) error { return syscall.Errno(n) }

func TestCanonicalOfAnAbsentPathResolvesItsAncestors(t *testing.T) {
	real := tempRealDir(t)
	link := tempRealDir(t) + "/link"
	mustSymlink(t, real, link)
	if got, want := canonical(link+"/not/yet"), real+"/not/yet"; got != want {
		t.Fatalf("canonical = %q, want %q", got, want)
	}
	if got := canonical("/nonexistent-root-xyz/a"); got != "/nonexistent-root-xyz/a" {
		t.Fatalf("canonical = %q", got)
	}
}

// ownFixture: an executor state dir inside a served root, and an Env that
// names it as the executor's own, with "/" allowed: the own files are
// refused "whatever the flags" (§6.2).
type ownFixture struct {
	root, state, key string
	env              *Env
}

func newOwnFixture(t *testing.T) ownFixture {
	t.Helper()
	root := tempRealDir(t)
	f := ownFixture{root: root, state: root + "/state", key: root + "/state/device.key"}
	if err := os.Mkdir(f.state, 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.key, "-----BEGIN PRIVATE KEY-----", 0o600)
	f.env = &Env{WorkspaceRoot: root, AllowedRoots: []string{"/"}, NeverServe: []string{f.state, f.key}}
	return f
}

// ownRefused asserts the own-files refusal.
func ownRefused(t *testing.T, what string, out protocol.Outcome) {
	t.Helper()
	f, ok := out.(protocol.Failure)
	if !ok || f.ErrorCode != protocol.ErrPermissionDenied || !strings.Contains(f.Message, "never served") {
		t.Fatalf("%s: %#v, want permission_denied: never served", what, out)
	}
}

func TestTheExecutorsOwnFilesAreNeverServed(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		fx := newOwnFixture(t)
		if prepared {
			fx.env.Prepare()
		}
		mustSymlink(t, fx.state, fx.root+"/via-link")
		paths := []string{fx.key, fx.state + "/device.json", fx.state + "/absent", fx.root + "/via-link/device.key", fx.state}
		for _, p := range paths {
			for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile, protocol.KindCanonicalPath,
				protocol.KindFileInfo, protocol.KindExists, protocol.KindReadLink, protocol.KindListDir} {
				out, sink := runFile(t, fx.env, kind, protocol.PathArgs{Path: p})
				ownRefused(t, string(kind)+" "+p, out)
				if len(sink.chunks) != 0 {
					t.Fatalf("%s %s sent content", kind, p)
				}
			}
			out, _ := runFile(t, fx.env, protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: p})
			ownRefused(t, "readTextLines "+p, out)
			for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindAppendFile, protocol.KindWriteFileExclusive} {
				ownRefused(t, string(kind)+" "+p, writeVia(t, fx.env, kind, p, []byte("forged")))
			}
			out, _ = runFile(t, fx.env, protocol.KindRemove, dirArgs(p, boolp(true)))
			ownRefused(t, "remove "+p, out)
			out, _ = runFile(t, fx.env, protocol.KindCreateDir, dirArgs(p+"/d", nil))
			ownRefused(t, "createDir "+p, out)
		}
		if got := mustRead(t, fx.key); got != "-----BEGIN PRIVATE KEY-----" {
			t.Fatalf("the key became %q", got)
		}
		wantDirHolds(t, fx.state, "device.key")
	}
}

// A temporary object is never made in the executor's own files either.
func TestTempKindsNeverCreateInOwnFiles(t *testing.T) {
	fx := newOwnFixture(t)
	fx.env.TempDir = fx.state
	for _, kind := range []protocol.InstructionKind{protocol.KindCreateTempFile, protocol.KindCreateTempDir} {
		var args protocol.Args = protocol.TempDirArgs{}
		if kind == protocol.KindCreateTempFile {
			args = protocol.TempFileArgs{}
		}
		out, _ := runFile(t, fx.env, kind, args)
		ownRefused(t, string(kind), out)
	}
	wantDirHolds(t, fx.state, "device.key")
}

// Env.TempDir is where the temp kinds create, and it is what containment
// allows; TMPDIR no longer decides.
func TestTempKindsCreateInEnvTempDir(t *testing.T) {
	fx := newContainFixture(t)
	t.Setenv("TMPDIR", fx.outside)
	env := &Env{AllowedRoots: []string{fx.root}, TempDir: fx.root + "/sub"}
	out, _ := runFile(t, env, protocol.KindCreateTempFile, protocol.TempFileArgs{Prefix: "p-"})
	w := wantArm[protocol.WriteOutcome](t, out)
	if !strings.HasPrefix(w.CanonicalPath, fx.root+"/sub/p-") {
		t.Fatalf("created %s, want it in %s", w.CanonicalPath, fx.root+"/sub")
	}
	wantDirHolds(t, fx.outside, "dir", "secret")
}

// A hard link to the key, made by a command (exec is not contained), is the
// key: reading or appending through it is refused.
func TestAHardLinkToTheKeyIsTheKey(t *testing.T) {
	fx := newOwnFixture(t)
	link := fx.root + "/innocent.txt"
	if err := os.Link(fx.key, link); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	for _, prepared := range []bool{false, true} {
		env := *fx.env
		if prepared {
			env.Prepare()
		}
		for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile} {
			out, sink := runFile(t, &env, kind, protocol.PathArgs{Path: link})
			f := wantFail(t, out, protocol.ErrPermissionDenied)
			if !strings.Contains(f.Message, "link to one of the executor's own files") || len(sink.chunks) != 0 {
				t.Fatalf("%s through a hard link: %q, %d chunks", kind, f.Message, len(sink.chunks))
			}
		}
		out, _ := runFile(t, &env, protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: link})
		wantFail(t, out, protocol.ErrPermissionDenied)
		for _, kind := range []protocol.InstructionKind{protocol.KindAppendFile, protocol.KindWriteFile} {
			wantFail(t, writeVia(t, &env, kind, link, []byte("forged")), protocol.ErrPermissionDenied)
		}
	}
	if got := mustRead(t, fx.key); got != "-----BEGIN PRIVATE KEY-----" {
		t.Fatalf("the key became %q", got)
	}
}

// "remove of an allowed root itself is refused": `sema fs rm -r .`
// must not delete the workspace.
func TestRemoveOfAnAllowedRootIsRefused(t *testing.T) {
	parent := tempRealDir(t)
	ws := parent + "/ws"
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, ws+"/work", "work", 0o644)
	mustSymlink(t, ws, parent+"/ws-link")
	env := &Env{AllowedRoots: []string{parent, ws}}
	for _, p := range []string{ws, parent} {
		for _, r := range []*bool{boolp(true), boolp(false), nil} {
			out, _ := runFile(t, env, protocol.KindRemove, dirArgs(p, r))
			f := wantFail(t, out, protocol.ErrPermissionDenied)
			if !strings.Contains(f.Message, "allowed root") {
				t.Fatalf("remove %s: %q", p, f.Message)
			}
		}
	}
	if got := mustRead(t, ws+"/work"); got != "work" {
		t.Fatal("the workspace lost its file")
	}
	// A symlink to the root is only a link: removing it removes the link.
	out, _ := runFile(t, env, protocol.KindRemove, dirArgs(parent+"/ws-link", nil))
	wantArm[protocol.VoidOutcome](t, out)
	wantDirHolds(t, ws, "work")
	out, _ = runFile(t, env, protocol.KindRemove, dirArgs(ws+"/work", nil))
	wantArm[protocol.VoidOutcome](t, out)
}
