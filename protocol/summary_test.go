package protocol

import (
	"strings"
	"testing"
)

func TestSummaryNeverHoldsContent(t *testing.T) {
	yes, ten, one := true, int64(10), int64(1)
	cases := []struct {
		kind InstructionKind
		args Args
		want string
	}{
		{KindExec, CommandArgs{Command: "make test"}, "make test"},
		{KindReadTextFile, PathArgs{Path: "/w/a.txt"}, "/w/a.txt"},
		{KindReadTextLines, ReadLinesArgs{Path: "/w/a", Limit: &ten}, "/w/a (at most 10 lines)"},
		{KindReadTextLines, ReadLinesArgs{Path: "/w/a", Offset: &ten, Limit: &one}, "/w/a from line 11 (at most 1 line)"},
		{KindWriteFile, WriteArgs{Path: "/w/b", ContentLen: 1}, "/w/b (1 byte)"},
		{KindWriteFile, WriteArgs{Path: "/w/b", ContentLen: 4096}, "/w/b (4096 bytes)"},
		{KindRemove, DirArgs{Path: "/w/d", Recursive: &yes}, "/w/d (recursive)"},
		{KindCreateDir, DirArgs{Path: "/w/d"}, "/w/d"},
		{KindCreateTempFile, TempFileArgs{Prefix: "x-", Suffix: ".go"}, "x-*.go"},
		{KindStatBatch, StatBatchArgs{Paths: []string{"/a", "/b"}}, "/a /b"},
	}
	for _, c := range cases {
		if got := Summary(c.kind, c.args, false); got != c.want {
			t.Errorf("Summary(%s) = %q, want %q", c.kind, got, c.want)
		}
	}
	got := Summary(KindExec, CommandArgs{Command: "echo secret"}, true)
	if strings.Contains(got, "secret") || !strings.HasPrefix(got, "sha256:") || !strings.HasSuffix(got, "(11 bytes)") {
		t.Errorf("a digested command: %q", got)
	}
	if Summary(KindExec, CommandArgs{Command: "a"}, true) == Summary(KindExec, CommandArgs{Command: "b"}, true) {
		t.Error("two commands share a digest")
	}
}
