package device

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// EnvStateDir names the environment variable that overrides the default
// state dir (a --state-dir flag overrides both).
const EnvStateDir = "SEMA_DEVICE_DIR"

// Files in the state dir.
const (
	KeyFile    = "device.key"  // the Ed25519 private key, PKCS#8 PEM, mode 0600
	RecordFile = "device.json" // the device record, mode 0600
	StatusFile = "status.json" // what `sema device status` reads, mode 0600
)

// StateDir resolves the state dir: flag when non-empty, else $SEMA_DEVICE_DIR,
// else the OS config dir (os.UserConfigDir) + /sema/device. The result is
// absolute and clean; the directory is not created.
func StateDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv(EnvStateDir)
	}
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no state dir: pass --state-dir or set %s (%v)", EnvStateDir, err)
		}
		dir = filepath.Join(base, "sema", "device")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state dir %q: %w", dir, err)
	}
	return abs, nil
}

// EnsureStateDir creates dir (and its parents) with mode 0700 if it does not
// exist, and refuses a path that exists and is not a directory.
func EnsureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %s is not a directory", dir)
	}
	return nil
}

// TempKindsDir is where the executor's createTempDir and createTempFile
// create things: <MachineLockDir>/tmp, made when absent and checked to be a
// real directory owned by this user and closed to others. It is one of the
// containment policy's allowed roots; the rest of the system's temporary
// directory is not (docs/executor.md, "Containment").
func TempKindsDir() (string, error) {
	base := MachineLockDir()
	dir := filepath.Join(base, "tmp")
	for _, d := range []string{base, dir} {
		if err := privateDir(d); err != nil {
			return "", fmt.Errorf("the directory for temporary files made through the lane cannot be used: %w (set TMPDIR to a directory of your own)", err)
		}
	}
	return dir, nil
}

// makeStateDir is EnsureStateDir that also returns the directories it
// created, deepest first, so that a failed enrollment can take them back
// (removeMade).
func makeStateDir(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := EnsureStateDir(dir); err != nil {
		removeMade(missing)
		return nil, err
	}
	return missing, nil
}

// removeMade removes the directories makeStateDir created, deepest first,
// each only while it is empty: what anyone put in them since stays, with
// the directories that hold it.
func removeMade(dirs []string) {
	for _, d := range dirs {
		if os.Remove(d) != nil {
			return
		}
	}
}
