//go:build linux || darwin

package ops

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Without a mapping, an append reads the staged payload back in pieces of
// appendPiece bytes, holding one: the target ends with exactly the payload.
func TestAppendStagedInPieces(t *testing.T) {
	dir := t.TempDir()
	payload := make([]byte, 2*appendPiece+12345)
	for i := range payload {
		payload[i] = byte(i*31 + i>>11)
	}
	staged := filepath.Join(dir, "staged")
	if err := os.WriteFile(staged, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(staged)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("head:"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(target, unix.O_WRONLY|unix.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	first := make([]byte, appendPiece)
	if _, err := f.ReadAt(first, 0); err != nil {
		t.Fatal(err)
	}
	n, err := appendStaged(fd, f, nil, first, int64(len(payload)))
	if err != nil || n != int64(len(payload)) {
		t.Fatalf("appended %d of %d bytes: %v", n, len(payload), err)
	}
	got, _ := os.ReadFile(target)
	if !bytes.Equal(got, append([]byte("head:"), payload...)) {
		t.Fatalf("the target holds %d bytes, not head: and the payload", len(got))
	}
	// Staged bytes that are not there any more: the read-back error after
	// what landed.
	if err := os.Truncate(staged, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := appendStaged(fd, f, nil, first, int64(len(payload))); n != appendPiece || err == nil {
		t.Fatalf("a vanished staging file: %d bytes, %v", n, err)
	}
}
