package executor

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func stagingFixture(t *testing.T) (stagingRegistry, string) {
	t.Helper()
	return stagingRegistry{dir: filepath.Join(t.TempDir(), "staging"), log: slog.New(slog.NewTextHandler(io.Discard, nil))}, t.TempDir()
}

func recordFile(t *testing.T, r stagingRegistry, path string) func() {
	t.Helper()
	if err := os.WriteFile(path, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return r.add(path, uint64(st.Dev), st.Ino)
}

// A staging file recorded by a previous executor process and still the same
// file is removed by the next one; its record is forgotten.
func TestSweepRemovesARecordedStagingFile(t *testing.T) {
	r, ws := stagingFixture(t)
	path := filepath.Join(ws, ".notes.txt.sema-0123456789abcdef.tmp")
	recordFile(t, r, path)
	if removed := r.sweep(); removed != 1 {
		t.Fatalf("removed %d files, want 1", removed)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the staging file is still there: %v", err)
	}
	if entries, _ := os.ReadDir(r.dir); len(entries) != 0 {
		t.Errorf("records left: %v", entries)
	}
}

// A record whose path now holds another object (another inode), or a name
// that is not a staging file's, never leads to a removal.
func TestSweepSparesWhatIsNotTheRecordedStagingFile(t *testing.T) {
	r, ws := stagingFixture(t)
	replaced := filepath.Join(ws, ".a.sema-0123456789abcdef.tmp")
	recordFile(t, r, replaced)
	other := filepath.Join(ws, "other") // made while the first exists: another inode
	os.WriteFile(other, []byte("another file"), 0o600)
	if err := os.Rename(other, replaced); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(ws, "notes.txt")
	recordFile(t, r, user)
	if removed := r.sweep(); removed != 0 {
		t.Fatalf("removed %d files, want 0", removed)
	}
	for _, p := range []string{replaced, user} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if entries, _ := os.ReadDir(r.dir); len(entries) != 0 {
		t.Errorf("records left: %v", entries)
	}
}

// A write that ends, whichever way, forgets its record: only a crash leaves
// one for the sweep.
func TestStagingRecordIsForgotten(t *testing.T) {
	r, ws := stagingFixture(t)
	forget := recordFile(t, r, filepath.Join(ws, ".b.sema-0123456789abcdef.tmp"))
	if entries, _ := os.ReadDir(r.dir); len(entries) != 1 {
		t.Fatalf("records: %v, want one", entries)
	}
	forget()
	if entries, _ := os.ReadDir(r.dir); len(entries) != 0 {
		t.Errorf("records left: %v", entries)
	}
	if (stagingRegistry{}).add("/x", 1, 2) != nil {
		t.Error("a registry with no dir recorded something")
	}
}
