package ops

import (
	"bytes"
	"os"
	"testing"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// A disk that fills while a write's payload is staged fails the write with
// a message that says the target was not touched, and leaves no staging
// file (§3.4: no half-written file). The disk is a 64 KiB tmpfs, so the
// test needs root.
func TestWriteOnAFullDiskLeavesNoHalfWrittenFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := tempRealDir(t)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	mustWrite(t, dir+"/keep", "old", 0o644)
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindWriteFileExclusive} {
		for _, p := range []string{dir + "/keep", dir + "/new"} {
			if kind == protocol.KindWriteFileExclusive && p == dir+"/keep" {
				continue
			}
			f := wantFail(t, writeVia(t, nil, kind, p, big), protocol.ErrUnknown)
			for _, says := range []string{"no space left on device", "nothing was written"} {
				if !bytes.Contains([]byte(f.Message), []byte(says)) {
					t.Errorf("%s %s: %q does not say %q", kind, p, f.Message, says)
				}
			}
			wantDirHolds(t, dir, "keep")
			if got := mustRead(t, dir+"/keep"); got != "old" {
				t.Fatalf("the target holds %q", got)
			}
		}
	}
}
