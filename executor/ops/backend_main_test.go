//go:build linux || darwin

package ops

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// TestMain runs the whole suite once on each backend this platform can
// build: on Linux the native one (O_PATH, /proc/self/fd, renameat2) and then
// the portable one, which is what darwin runs (fsys_portable.go, walk.go);
// on darwin its own, once. So the same table of tests holds for both, and
// nearly every line darwin runs is tested on Linux too (docs/fs-ops.md).
// SEMA_FS_BACKEND=linux or =portable runs only that one.
func TestMain(m *testing.M) {
	backends := []backend{nativeBackend()}
	if p := portableBackend(); p.name() != backends[0].name() {
		backends = append(backends, p)
	}
	if only := os.Getenv("SEMA_FS_BACKEND"); only != "" {
		backends = slices.DeleteFunc(backends, func(b backend) bool { return b.name() != only })
		if len(backends) == 0 {
			fmt.Fprintf(os.Stderr, "SEMA_FS_BACKEND=%q names no backend of this platform (%s, %s)\n", only, nativeBackend().name(), portableBackend().name())
			os.Exit(2)
		}
	}
	code := 0
	for _, b := range backends {
		fsys = b
		fmt.Fprintf(os.Stderr, "=== the file operations on the %s backend\n", b.name())
		if c := m.Run(); c != 0 {
			fmt.Fprintf(os.Stderr, "--- FAIL: the tests above failed on the %s backend\n", b.name())
			code = c
		}
	}
	os.Exit(code)
}
