package pidlock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestASecondAcquireIsRefusedNamingTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Path != path {
		t.Fatalf("second acquire: %v, want HeldError naming pid %d", err, os.Getpid())
	}
	l.Release()
	l.Release() // idempotent
	again, err := Acquire(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("a released lock still names a holder: %q", b)
	}
}

func TestAcquireNamesAnUnusablePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "x.lock")
	if _, err := Acquire(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error naming %s", err, path)
	}
}
