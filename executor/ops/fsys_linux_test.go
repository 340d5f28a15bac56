package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// TestBackendsAreDistinct: on Linux the suite really runs twice, once on
// each backend; a portable backend that were the native one again would
// test nothing new.
func TestBackendsAreDistinct(t *testing.T) {
	if _, ok := nativeBackend().(linuxFS); !ok {
		t.Fatalf("the native backend on Linux is a %T, not linuxFS", nativeBackend())
	}
	if _, ok := portableBackend().(portableFS); !ok {
		t.Fatalf("the portable backend on Linux is a %T, not portableFS", portableBackend())
	}
}

// "The portable backend passes the same table as the Linux one": beyond
// running the whole suite on each, every read-only kind on every shape of
// path answers exactly the same on both — outcome, message and content.
func TestBackendsAnswerAlike(t *testing.T) {
	fx := newContainFixture(t)
	root := fx.root
	for _, d := range []string{"a/b/c", "locked"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, root+"/a/b/c/f", "deep\nlines\n", 0o644)
	mustWrite(t, root+"/locked/f", "x", 0o644)
	mustSymlink(t, "a/b", root+"/rel")
	mustSymlink(t, root+"/a", root+"/abs")
	mustSymlink(t, "../../rel/c/f", root+"/a/b/up")
	mustSymlink(t, "loop2", root+"/loop1")
	mustSymlink(t, "loop1", root+"/loop2")
	mustSymlink(t, "..", root+"/parent")
	mustSymlink(t, "inside/x", root+"/through-file")
	if err := unix.Mkfifo(root+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root+"/locked", 0o311); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(root+"/locked", 0o755) })
	var paths []string
	for _, rel := range []string{"", "/inside", "/sub", "/sub/up", "/sub/back", "/esc", "/escdir", "/escdir/secret",
		"/esc-dangling", "/absent", "/absent/deep", "/a/b/c/f", "/rel/c/f", "/abs/b/c", "/a/b/up", "/loop1",
		"/loop1/x", "/parent", "/parent/" + filepath.Base(fx.outside) + "/secret", "/through-file", "/inside/x",
		"/fifo", "/locked", "/locked/f", "/rel", "/abs"} {
		paths = append(paths, root+rel)
	}
	paths = append(paths, "/", fx.outside+"/secret")
	kinds := []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile, protocol.KindFileInfo,
		protocol.KindExists, protocol.KindCanonicalPath, protocol.KindReadLink, protocol.KindListDir}
	answers := func(b backend) []string {
		saved := fsys
		fsys = b
		defer func() { fsys = saved }()
		var got []string
		for _, p := range paths {
			for _, kind := range kinds {
				var out protocol.Outcome
				sink := &fsSink{}
				asNobody(t, func() {
					out = File(context.Background(), fx.env, Request{Kind: kind, Args: protocol.PathArgs{Path: p}}, sink)
				})
				b, err := json.Marshal(out)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %s: %s %q", kind, p, b, sink.content()))
			}
			lines := &fsSink{}
			out := File(context.Background(), fx.env, Request{Kind: protocol.KindReadTextLines, Args: protocol.ReadLinesArgs{Path: p, Offset: int64p(1)}}, lines)
			got = append(got, fmt.Sprintf("readTextLines %s: %#v %q", p, out, lines.content()))
		}
		return got
	}
	linux, portable := answers(linuxFS{}), answers(portableBackend())
	for i := range linux {
		if linux[i] != portable[i] {
			t.Errorf("the backends disagree:\n  linux:    %s\n  portable: %s", linux[i], portable[i])
		}
	}
}

func int64p(v int64) *int64 { return &v }
