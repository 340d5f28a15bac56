package device

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sema-agent/sema/internal/pidlock"
)

// LockedError means another process holds this device's single-instance
// lock (§6.10, R10): a second executor for one device id must not run.
type LockedError struct {
	DeviceID string
	Path     string
	PID      int // the holder's pid as it recorded it; 0 if unknown
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("another executor is already serving device %s (%s holds the lock %s); "+
		"run one executor per device", e.DeviceID, holder, e.Path)
}

// Lock is a held single-instance lock. Release it when the executor exits;
// the kernel releases it anyway when the process dies.
type Lock struct {
	held []*pidlock.Lock
}

// MachineLockDir is the machine-wide, per-user directory of device locks:
// $TMPDIR/sema-<uid>. It catches a second executor even when it runs from a
// copy of the state dir.
func MachineLockDir() string {
	return filepath.Join(os.TempDir(), "sema-"+strconv.Itoa(os.Getuid()))
}

// AcquireLock takes the single-instance lock of deviceID without waiting:
// flock(LOCK_EX|LOCK_NB) on <stateDir>/device-<id>.lock and on
// <machineDir>/device-<id>.lock (machineDir "" means MachineLockDir). It
// returns *LockedError at once when another process holds either.
//
// The machine-wide lock is skipped, and warn says why, when its directory is
// not safe to use (not ours, a symlink, not creatable): the state-dir lock
// still holds then.
func AcquireLock(stateDir, machineDir, deviceID string) (l *Lock, warn error, err error) {
	if deviceID == "" || strings.ContainsAny(deviceID, "/\x00") {
		return nil, nil, fmt.Errorf("lock: invalid device id %q", deviceID)
	}
	name := "device-" + deviceID + ".lock"
	l = &Lock{}
	if err := l.take(filepath.Join(stateDir, name), deviceID); err != nil {
		return nil, nil, err
	}
	if machineDir == "" {
		machineDir = MachineLockDir()
	}
	if werr := privateDir(machineDir); werr != nil {
		return l, fmt.Errorf("machine-wide lock skipped: %w", werr), nil
	}
	if err := l.take(filepath.Join(machineDir, name), deviceID); err != nil {
		l.Release()
		return nil, nil, err
	}
	return l, nil, nil
}

func (l *Lock) take(path, deviceID string) error {
	held, err := pidlock.Acquire(path)
	var he *pidlock.HeldError
	if errors.As(err, &he) {
		return &LockedError{DeviceID: deviceID, Path: path, PID: he.PID}
	}
	if err != nil {
		return err
	}
	l.held = append(l.held, held)
	return nil
}

// Paths are the lock files held: the executor's own files, never served
// through the lane (a replaced lock file would no longer exclude).
func (l *Lock) Paths() []string {
	if l == nil {
		return nil
	}
	paths := make([]string, 0, len(l.held))
	for _, h := range l.held {
		paths = append(paths, h.Path())
	}
	return paths
}

// Release drops the lock. It is idempotent.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	for _, h := range l.held {
		h.Release()
	}
	l.held = nil
}

// privateDir makes sure dir exists, is a real directory (not a symlink)
// owned by this user and closed to others.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s is not owned by this user", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others", dir)
	}
	return nil
}
