package ops

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The darwin halves of the test helpers.

// readUmask reads this process's umask: darwin has no /proc, so it is set
// and put back at once (a test creates no files meanwhile).
func readUmask(t *testing.T) os.FileMode {
	t.Helper()
	old := unix.Umask(0o022)
	unix.Umask(old)
	return os.FileMode(old)
}

// asNobody runs fn without root's permission bypass. darwin has no
// per-thread filesystem uid (setfsuid), so as root the test is skipped: the
// permission tests need an unprivileged run there (docs/fs-ops.md).
func asNobody(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("as root on darwin: no per-thread filesystem uid to drop the permission bypass; run as a user")
	}
	fn()
}
