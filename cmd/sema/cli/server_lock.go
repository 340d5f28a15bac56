package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sema-agent/sema/internal/pidlock"
)

// ServerLockFile is the lock in the data dir that keeps one sema server per
// data dir: with SQLite the registry is there, and whatever the registry
// admin.key is. It holds with --postgres too: two servers writing one
// admin.key (or, under scale-out, one replica's state) are a mistake
// however the registry is shared; replicas on one PostgreSQL each have their
// own data dir.
const ServerLockFile = "server.lock"

// lockDataDir takes the data dir's lock, or says which server holds it.
// The kernel releases it when this process dies, however it dies.
func lockDataDir(dir string) (*pidlock.Lock, error) {
	l, err := pidlock.Acquire(filepath.Join(dir, ServerLockFile))
	var held *pidlock.HeldError
	switch {
	case errors.As(err, &held) && held.PID > 0:
		return nil, fmt.Errorf("another sema server (pid %d) is using %s", held.PID, dir)
	case errors.As(err, &held):
		return nil, fmt.Errorf("another sema server is using %s", dir)
	}
	return l, err
}
