package ops

import "testing"

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
