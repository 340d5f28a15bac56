package cli_test

import (
	"bytes"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// treeOf is every file under dir with its content and mode, and every
// directory, by relative path.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = fi.Mode().Perm().String() + " " + string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// put -r and get -r copy a tree as cp -r does: to DEST, or into DEST/NAME
// when DEST is a directory; links to files are followed; executable bits
// go along; a summary at the end.
func TestFsRecursiveCopies(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)

	src := filepath.Join(t.TempDir(), "a")
	big := make([]byte, 300<<10)
	rand.Read(big)
	for _, d := range []string{"sub", "empty"} {
		os.MkdirAll(filepath.Join(src, d), 0o755)
	}
	os.WriteFile(filepath.Join(src, "x.txt"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "big.bin"), big, 0o644)
	os.WriteFile(filepath.Join(src, "sub", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("x.txt", filepath.Join(src, "link"))
	want := treeOf(t, src)

	out, errOut, code := s.sema(t, nil, "fs", "put", "-r", src, "dst")
	if code != 0 || !strings.Contains(errOut, "put 4 files (") || !strings.Contains(errOut, "and 3 directories to "+filepath.Join(ws, "dst")) {
		t.Fatalf("put -r: exit %d: %s %s", code, out, errOut)
	}
	if got := treeOf(t, filepath.Join(ws, "dst")); !equalTrees(got, want) {
		t.Fatalf("put -r made\n%v\nwant\n%v", got, want)
	}
	if _, errOut, code := s.sema(t, nil, "fs", "put", "-r", src, "dst"); code != 0 {
		t.Fatalf("put -r into a directory: exit %d: %s", code, errOut)
	}
	if got := treeOf(t, filepath.Join(ws, "dst", "a")); !equalTrees(got, want) {
		t.Fatalf("put -r into dst made\n%v", got)
	}

	// The link arrived as a file; get -r brings the tree back.
	local := t.TempDir()
	_, errOut, code = s.sema(t, nil, "fs", "get", "-r", "dst/a", local)
	if code != 0 || !strings.Contains(errOut, "got 4 files") {
		t.Fatalf("get -r: exit %d: %s", code, errOut)
	}
	if got := treeOf(t, filepath.Join(local, "a")); !equalTrees(got, want) {
		t.Fatalf("get -r made\n%v", got)
	}
	if _, errOut, code := s.sema(t, nil, "fs", "get", "-r", "dst/a", "-"); code != 2 {
		t.Fatalf("get -r to -: exit %d: %s", code, errOut)
	}
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal([]byte(v), []byte(w)) {
			return false
		}
	}
	return true
}
