//go:build linux || darwin

package ops

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

func TestReadFileContent(t *testing.T) {
	dir := tempRealDir(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 100, MaxChunkBytes - 1, MaxChunkBytes, MaxChunkBytes + 1, 3*MaxChunkBytes + 17} {
		content := make([]byte, size)
		for i := range content {
			content[i] = byte(rng.Uint32())
		}
		p := dir + "/f"
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile} {
			out, sink := runFile(t, nil, kind, protocol.PathArgs{Path: p})
			wantArm[protocol.ReadOutcome](t, out)
			sink.checkChunks(t)
			if !bytes.Equal(sink.content(), content) {
				t.Fatalf("%s of %d bytes: content differs", kind, size)
			}
			if want := (size + MaxChunkBytes - 1) / MaxChunkBytes; kind == protocol.KindReadBinaryFile && len(sink.chunks) != want {
				t.Errorf("%s of %d bytes: %d chunks, want %d", kind, size, len(sink.chunks), want)
			}
		}
	}
}

func TestReadEmptyFileSendsNoChunk(t *testing.T) {
	p := tempRealDir(t) + "/empty"
	mustWrite(t, p, "", 0o644)
	for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile} {
		out, sink := runFile(t, nil, kind, protocol.PathArgs{Path: p})
		wantArm[protocol.ReadOutcome](t, out)
		if len(sink.chunks) != 0 {
			t.Fatalf("%s of an empty file sent %d chunks", kind, len(sink.chunks))
		}
	}
	out, sink := runFile(t, nil, protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: p})
	wantArm[protocol.ReadOutcome](t, out)
	if len(sink.chunks) != 0 {
		t.Fatalf("readTextLines of an empty file sent %d chunks", len(sink.chunks))
	}
}

// A text chunk never ends inside a UTF-8 sequence of a valid UTF-8 file.
func TestReadTextChunksEndOnCharacters(t *testing.T) {
	p := tempRealDir(t) + "/utf8"
	var b strings.Builder
	for b.Len() < 4*MaxChunkBytes {
		b.WriteString("a€😀é") // 1, 3, 4 and 2 bytes: every cut position occurs
	}
	mustWrite(t, p, b.String(), 0o644)
	for _, args := range []protocol.Args{protocol.PathArgs{Path: p}, protocol.ReadLinesArgs{Path: p}} {
		kind := protocol.KindReadTextFile
		if _, ok := args.(protocol.ReadLinesArgs); ok {
			kind = protocol.KindReadTextLines
		}
		out, sink := runFile(t, nil, kind, args)
		wantArm[protocol.ReadOutcome](t, out)
		sink.checkChunks(t)
		for i, c := range sink.chunks {
			if !utf8.Valid(c) {
				t.Fatalf("%s chunk %d is cut inside a character", kind, i)
			}
		}
		if string(sink.content()) != b.String() {
			t.Fatalf("%s: content differs", kind)
		}
	}
}

func TestUTF8Cut(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"abc", 3}, {"ab\xe2\x82", 2}, {"ab\xe2", 2}, {"ab\xe2\x82\xac", 5},
		{"a\xf0\x9f\x98", 1}, {"a\xf0\x9f\x98\x80", 5}, {"a\xff", 2}, {"\x80\x80\x80\x80", 4},
	} {
		if got := utf8Cut([]byte(c.in)); got != c.want {
			t.Errorf("utf8Cut(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestReadTextLines(t *testing.T) {
	p := tempRealDir(t) + "/lines"
	i64 := func(v int64) *int64 { return &v }
	cases := []struct {
		name          string
		content       string
		offset, limit *int64
		want          string
	}{
		{"all", "a\nb\nc\n", nil, nil, "a\nb\nc\n"},
		{"limit", "a\nb\nc\n", nil, i64(2), "a\nb\n"},
		{"limit zero", "a\nb\n", nil, i64(0), ""},
		{"limit past end", "a\nb\n", nil, i64(10), "a\nb\n"},
		{"offset", "a\nb\nc\n", i64(1), nil, "b\nc\n"},
		{"offset and limit", "a\nb\nc\nd\n", i64(1), i64(2), "b\nc\n"},
		{"offset past end", "a\nb\n", i64(5), nil, ""},
		{"last line without newline", "a\nb", nil, nil, "a\nb"},
		{"last line without newline within limit", "a\nb", nil, i64(2), "a\nb"},
		{"last line without newline past limit", "a\nb", nil, i64(1), "a\n"},
		{"offset onto last line without newline", "a\nb", i64(1), nil, "b"},
		{"offset past last line without newline", "a\nb", i64(2), nil, ""},
		{"crlf stays", "a\r\nb\r\n", nil, i64(1), "a\r\n"},
		{"empty lines count", "\n\n\nx\n", i64(2), i64(2), "\nx\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustWrite(t, p, c.content, 0o644)
			out, sink := runFile(t, nil, protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: p, Offset: c.offset, Limit: c.limit})
			wantArm[protocol.ReadOutcome](t, out)
			sink.checkChunks(t)
			if got := string(sink.content()); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	for _, bad := range []protocol.ReadLinesArgs{{Path: p, Offset: i64(-1)}, {Path: p, Limit: i64(-1)}} {
		out, _ := runFile(t, nil, protocol.KindReadTextLines, bad)
		wantFail(t, out, protocol.ErrInvalid)
	}
}

// Lines that straddle read buffers and chunk boundaries are counted right.
func TestReadTextLinesLarge(t *testing.T) {
	p := tempRealDir(t) + "/big"
	var b strings.Builder
	var lines []string
	for i := 0; b.Len() < 5*MaxChunkBytes; i++ {
		l := strings.Repeat(string(rune('a'+i%26)), i%3000) + "\n"
		lines = append(lines, l)
		b.WriteString(l)
	}
	mustWrite(t, p, b.String(), 0o644)
	for _, c := range [][2]int64{{0, 1}, {3, 40}, {100, 7}, {int64(len(lines)) - 2, 5}} {
		off, lim := c[0], c[1]
		out, sink := runFile(t, nil, protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: p, Offset: &off, Limit: &lim})
		wantArm[protocol.ReadOutcome](t, out)
		sink.checkChunks(t)
		want := strings.Join(lines[off:min(off+lim, int64(len(lines)))], "")
		if got := string(sink.content()); got != want {
			t.Fatalf("offset %d limit %d: got %d bytes, want %d", off, lim, len(got), len(want))
		}
	}
}

func TestReadThroughSymlink(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/real", "hello", 0o644)
	mustSymlink(t, "real", dir+"/link")
	out, sink := runFile(t, nil, protocol.KindReadTextFile, protocol.PathArgs{Path: dir + "/link"})
	wantArm[protocol.ReadOutcome](t, out)
	if string(sink.content()) != "hello" {
		t.Fatalf("got %q", sink.content())
	}
}

func TestReadErrors(t *testing.T) {
	dir := tempRealDir(t)
	mustWrite(t, dir+"/file", "secret", 0o644)
	if err := os.Mkdir(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(dir+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "nowhere", dir+"/dangling")
	mustSymlink(t, "loop", dir+"/loop")
	for _, kind := range []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadBinaryFile, protocol.KindReadTextLines} {
		for _, c := range []struct {
			path string
			code protocol.ErrorCode
		}{
			{dir + "/absent", protocol.ErrNotFound},
			{dir + "/dangling", protocol.ErrNotFound},
			{dir + "/sub", protocol.ErrIsDirectory},
			{dir + "/file/x", protocol.ErrNotDirectory},
			{dir + "/fifo", protocol.ErrInvalid}, // a fifo would block the open: refused, never opened
			{dir + "/loop", protocol.ErrUnknown},
		} {
			var args protocol.Args = protocol.PathArgs{Path: c.path}
			if kind == protocol.KindReadTextLines {
				args = protocol.ReadLinesArgs{Path: c.path}
			}
			out, _ := runFile(t, nil, kind, args)
			f := wantFail(t, out, c.code)
			if !strings.Contains(f.Message, c.path) {
				t.Errorf("%s %s: message %q does not name the path", kind, c.path, f.Message)
			}
		}
	}
}

func TestReadPermissionDenied(t *testing.T) {
	dir := traversableDir(t)
	mustWrite(t, dir+"/private", "secret", 0o600)
	if err := os.Mkdir(dir+"/closed", 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir+"/closed/f", "secret", 0o644)
	for _, p := range []string{dir + "/private", dir + "/closed/f"} {
		var out protocol.Outcome
		sink := &fsSink{}
		asNobody(t, func() {
			out = File(context.Background(), &Env{}, Request{Kind: protocol.KindReadTextFile, Args: protocol.PathArgs{Path: p}}, sink)
		})
		f := wantFail(t, out, protocol.ErrPermissionDenied)
		if strings.Contains(f.Message, "secret") || len(sink.chunks) != 0 {
			t.Fatalf("%s: content leaked: %q, %d chunks", p, f.Message, len(sink.chunks))
		}
	}
}

func TestReadStops(t *testing.T) {
	p := tempRealDir(t) + "/big"
	mustWrite(t, p, strings.Repeat("x", 4*MaxChunkBytes), 0o644)

	// A cancel after output was sent: killed.
	ctx, cancel := context.WithCancelCause(context.Background())
	sink := &fsSink{onData: func(n int) { cancel(ErrCancelled) }}
	out := File(ctx, &Env{}, Request{Kind: protocol.KindReadBinaryFile, Args: protocol.PathArgs{Path: p}}, sink)
	if c := wantArm[protocol.CancelledOutcome](t, out); c.State != protocol.CancelKilled {
		t.Fatalf("state %q, want killed", c.State)
	}

	// Another cause: aborted.
	ctx, cancel = context.WithCancelCause(context.Background())
	sink = &fsSink{onData: func(n int) { cancel(errors.New("shutdown")) }}
	out = File(ctx, &Env{}, Request{Kind: protocol.KindReadBinaryFile, Args: protocol.PathArgs{Path: p}}, sink)
	wantFail(t, out, protocol.ErrAborted)

	// A sink that cannot deliver: the op stops, aborted (as Exec answers).
	sink = &fsSink{err: errors.New("outbox closed")}
	out = File(context.Background(), &Env{}, Request{Kind: protocol.KindReadBinaryFile, Args: protocol.PathArgs{Path: p}}, sink)
	if f := wantFail(t, out, protocol.ErrAborted); !strings.Contains(f.Message, "outbox closed") {
		t.Fatalf("message %q", f.Message)
	}
	if len(sink.chunks) != 1 {
		t.Fatalf("the op went on after the sink failed: %d chunks", len(sink.chunks))
	}
}
