//go:build linux || darwin

package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// Helpers shared by the file-op tests: a recording sink, request builders,
// payload frames, outcome assertions, and a way to run an op without root's
// permission bypass.

// fsSink records the data chunks of one op.
type fsSink struct {
	mu     sync.Mutex
	chunks [][]byte
	err    error       // returned by Data when set
	onData func(n int) // called after the n-th chunk (1-based), when set
	kinds  []protocol.ChunkKind
}

func (s *fsSink) Data(kind protocol.ChunkKind, p []byte) error {
	s.mu.Lock()
	s.chunks = append(s.chunks, bytes.Clone(p))
	s.kinds = append(s.kinds, kind)
	n, on, err := len(s.chunks), s.onData, s.err
	s.mu.Unlock()
	if on != nil {
		on(n)
	}
	return err
}

func (s *fsSink) Exit(int) error { return errors.New("file ops never send an exit chunk") }

func (s *fsSink) content() []byte { return bytes.Join(s.chunks, nil) }

// checkChunks asserts the §4 rules for read-family chunks: data kind,
// none empty, none over MaxChunkBytes.
func (s *fsSink) checkChunks(t *testing.T) {
	t.Helper()
	for i, c := range s.chunks {
		if s.kinds[i] != protocol.ChunkData {
			t.Errorf("chunk %d has kind %q, want data", i, s.kinds[i])
		}
		if len(c) == 0 || len(c) > MaxChunkBytes {
			t.Errorf("chunk %d has %d bytes, want 1..%d", i, len(c), MaxChunkBytes)
		}
	}
}

// run runs one file instruction with a background context.
func runFile(t *testing.T, env *Env, kind protocol.InstructionKind, args protocol.Args) (protocol.Outcome, *fsSink) {
	t.Helper()
	return runFileReq(t, context.Background(), env, Request{InstructionID: "01TEST", Kind: kind, Args: args})
}

// runReq runs File and checks that the outcome is one the lane accepts for
// the kind (protocol.CheckOutcome) and that it encodes.
func runFileReq(t *testing.T, ctx context.Context, env *Env, req Request) (protocol.Outcome, *fsSink) {
	t.Helper()
	if env == nil {
		env = &Env{}
	}
	sink := &fsSink{}
	out := File(ctx, env, req, sink)
	checkFileOutcome(t, req.Kind, out)
	return out, sink
}

func checkFileOutcome(t *testing.T, kind protocol.InstructionKind, out protocol.Outcome) {
	t.Helper()
	if err := protocol.CheckOutcome(kind, out); err != nil {
		t.Fatalf("%s answered %#v, which the lane refuses: %v", kind, out, err)
	}
	if _, err := json.Marshal(out); err != nil {
		t.Fatalf("%s answered %#v, which does not encode: %v", kind, out, err)
	}
}

// wantCode asserts a failure with code and returns it.
func wantFail(t *testing.T, out protocol.Outcome, code protocol.ErrorCode) protocol.Failure {
	t.Helper()
	f, ok := out.(protocol.Failure)
	if !ok {
		t.Fatalf("got %#v, want a failure %s", out, code)
	}
	if f.ErrorCode != code {
		t.Fatalf("got %s, want %s", f, code)
	}
	if f.Message == "" {
		t.Fatalf("failure %s has no message", code)
	}
	return f
}

// wantOK asserts a success arm of type T.
func wantArm[T protocol.Outcome](t *testing.T, out protocol.Outcome) T {
	t.Helper()
	v, ok := out.(T)
	if !ok {
		t.Fatalf("got %#v, want a %T", out, *new(T))
	}
	return v
}

// payload cuts content into the §3.4 sub-sequence: begin, chunks of part
// bytes, commit.
func payloadFrames(content []byte, part int) []*protocol.Payload {
	sum := protocol.Digest(sha256.Sum256(content))
	n := int64(len(content))
	frames := []*protocol.Payload{{InstructionID: "01TEST", Part: protocol.PartBegin, TotalLen: n, SHA256: sum}}
	for off := 0; off < len(content); off += part {
		end := min(off+part, len(content))
		frames = append(frames, &protocol.Payload{InstructionID: "01TEST", Part: protocol.PartChunk, Offset: int64(off), Data: content[off:end]})
	}
	return append(frames, &protocol.Payload{InstructionID: "01TEST", Part: protocol.PartCommit, TotalLen: n, SHA256: sum})
}

// feed returns a channel holding frames, closed after them.
func feedFrames(frames []*protocol.Payload) chan *protocol.Payload {
	ch := make(chan *protocol.Payload, len(frames))
	for _, f := range frames {
		ch <- f
	}
	close(ch)
	return ch
}

// writeArgs are the args for content at p.
func writeArgs(p string, content []byte) protocol.WriteArgs {
	return protocol.WriteArgs{Path: p, ContentLen: int64(len(content)), SHA256: sha256.Sum256(content)}
}

// write runs a write-family kind of content to p with 7-byte parts, so
// that even small contents travel as several chunks.
func writeVia(t *testing.T, env *Env, kind protocol.InstructionKind, p string, content []byte) protocol.Outcome {
	t.Helper()
	out, _ := runFileReq(t, context.Background(), env, Request{
		InstructionID: "01TEST", Kind: kind, Args: writeArgs(p, content), Payload: feedFrames(payloadFrames(content, 7)),
	})
	return out
}

// names lists a directory, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

// wantNames asserts a directory holds exactly want: no staging file left.
func wantDirHolds(t *testing.T, dir string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want exactly %q", dir, got, want)
	}
}

func mustWrite(t *testing.T, p string, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// realDir is a fresh t.TempDir under its real path (t.TempDir may lie below
// a symlinked TMPDIR, and canonical answers are real paths).
func tempRealDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// inode of p (lstat).
func inodeOf(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(st.Ino, 10)
}

// nobodyID is the unprivileged uid and gid permission tests run as.
const nobodyID = 65534

// sharedDir is a directory every user may traverse, for permission tests
// (t.TempDir is 0700, so nobodyID could not even reach its files).
func traversableDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sema-ops-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err = filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFileKindsHonest(t *testing.T) {
	kinds := FileKinds(&Env{})
	for _, k := range kinds {
		if !k.Valid() || k.IsExec() {
			t.Errorf("FileKinds lists %q, which File does not implement", k)
		}
	}
	for _, absent := range []protocol.InstructionKind{protocol.KindWriteFileGuarded, protocol.KindStatBatch} {
		if slices.Contains(kinds, absent) {
			t.Errorf("FileKinds declares %q, which File answers not_supported", absent)
		}
	}
	// Every non-exec kind of the closed set is either declared or absent on
	// purpose; nothing is forgotten.
	for _, k := range protocol.InstructionKinds() {
		if k.IsExec() || k == protocol.KindWriteFileGuarded || k == protocol.KindStatBatch {
			continue
		}
		if !slices.Contains(kinds, k) {
			t.Errorf("FileKinds leaves out %q", k)
		}
	}
}

func TestFileAbsentKinds(t *testing.T) {
	dir := tempRealDir(t)
	out, _ := runFileReq(t, context.Background(), nil, Request{
		Kind:    protocol.KindWriteFileGuarded,
		Args:    protocol.WriteArgs{Path: dir + "/f", Expect: &protocol.Expect{CanonicalPath: dir + "/f"}},
		Payload: feedFrames(payloadFrames([]byte("x"), 1)),
	})
	wantFail(t, out, protocol.ErrNotSupported)
	wantDirHolds(t, dir)
	out, _ = runFile(t, nil, protocol.KindStatBatch, protocol.StatBatchArgs{Paths: []string{dir}})
	wantFail(t, out, protocol.ErrNotSupported)
	out, _ = runFile(t, nil, protocol.KindExec, protocol.CommandArgs{Command: "true"})
	wantFail(t, out, protocol.ErrNotSupported)
}

func TestFileArgsMustFit(t *testing.T) {
	out, _ := runFile(t, nil, protocol.KindReadTextFile, protocol.DirArgs{Path: "/"})
	wantFail(t, out, protocol.ErrInvalid)
}

func TestFileRelativePathsRefused(t *testing.T) {
	for _, p := range []string{"rel/file", "/a/../b", "/a/", "~/x", ""} {
		for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindExists, protocol.KindCanonicalPath, protocol.KindListDir} {
			out, _ := runFile(t, nil, kind, protocol.PathArgs{Path: p})
			wantFail(t, out, protocol.ErrInvalid)
		}
		out := writeVia(t, nil, protocol.KindWriteFile, p, []byte("x"))
		wantFail(t, out, protocol.ErrInvalid)
	}
}

func TestFileContextDoneBeforeStart(t *testing.T) {
	dir := tempRealDir(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCancelled)
	out, _ := runFileReq(t, ctx, nil, Request{Kind: protocol.KindCreateDir, Args: protocol.DirArgs{Path: dir + "/d"}})
	if c := wantArm[protocol.CancelledOutcome](t, out); c.State != protocol.CancelNotStarted {
		t.Fatalf("state %q, want not_started", c.State)
	}
	wantDirHolds(t, dir)

	ctx, cancel = context.WithCancelCause(context.Background())
	cancel(errors.New("fenced"))
	out, _ = runFileReq(t, ctx, nil, Request{Kind: protocol.KindCreateDir, Args: protocol.DirArgs{Path: dir + "/d"}})
	wantFail(t, out, protocol.ErrAborted)
	wantDirHolds(t, dir)
}
