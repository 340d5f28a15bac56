//go:build linux || darwin

package ops

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the whole suite once on each backend this platform can
// build: on Linux the native one (O_PATH, /proc/self/fd, renameat2) and then
// the portable one, which is what darwin runs (fsys_portable.go, walk.go);
// on darwin its own, once. So the same table of tests holds for both, and
// nearly every line darwin runs is tested on Linux too (docs/fs-ops.md).
func TestMain(m *testing.M) {
	backends := []backend{nativeBackend()}
	if p := portableBackend(); p.name() != backends[0].name() {
		backends = append(backends, p)
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

// TestBackendsAreDistinct: on Linux the suite really runs twice, once on
// each backend; a portable backend that were the native one again would
// test nothing new.
func TestBackendsAreDistinct(t *testing.T) {
	n, p := nativeBackend(), portableBackend()
	if _, linux := n.(linuxFS); linux {
		if _, ok := p.(portableFS); !ok {
			t.Fatalf("on Linux the portable backend is a %T, not portableFS", p)
		}
	}
	if fsys.name() != n.name() && fsys.name() != p.name() {
		t.Fatalf("the suite runs on %q, which is neither backend", fsys.name())
	}
}
