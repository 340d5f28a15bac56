package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor/ops"
)

// containment is the executor's containment policy (§6.6,
// docs/executor.md "Containment"): file instructions and exec's working
// directory reach the workspace root, the temporary kinds' directory and
// each --allow-path (allow, checked by allowedDirs); the state dir (key,
// record, lock, procs, status), the key and record files by identity, and
// the lock files are never served.
func containment(workspace, tempDir string, allow []string, stateDir string, lock *device.Lock) ops.Env {
	roots := []string{workspace, tempDir}
	for _, dir := range allow {
		if !slices.Contains(roots, dir) {
			roots = append(roots, dir)
		}
	}
	never := []string{stateDir, filepath.Join(stateDir, device.KeyFile), filepath.Join(stateDir, device.RecordFile)}
	never = append(never, lock.Paths()...)
	return ops.Env{AllowedRoots: roots, NeverServe: never, TempDir: tempDir}
}

// allowedDirs checks each --allow-path: an existing directory, made
// absolute. A typo must not silently contain nothing.
func allowedDirs(paths []string) ([]string, error) {
	dirs := make([]string, 0, len(paths))
	for _, p := range paths {
		dir, err := allowedDir(p)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

func allowedDir(p string) (string, error) {
	if p == "" {
		return "", usageError{fmt.Errorf("%s needs a directory", ops.AllowPathFlag)}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", usageError{fmt.Errorf("%s %q: %v", ops.AllowPathFlag, p, err)}
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", usageError{fmt.Errorf("%s %s: %v", ops.AllowPathFlag, abs, err)}
	case !fi.IsDir():
		return "", usageError{fmt.Errorf("%s %s: not a directory", ops.AllowPathFlag, abs)}
	}
	return abs, nil
}

// logContainment says at start what the lane can reach, and says it loudly
// when that is the whole filesystem.
func logContainment(log *slog.Logger, env ops.Env) {
	if slices.Contains(env.AllowedRoots, "/") {
		log.Warn("serving the whole filesystem (" + ops.AllowPathFlag + " /): file instructions reach every path this user can, " +
			"except the executor's own files")
	}
	log.Info("containment", "allowed_roots", strings.Join(env.AllowedRoots, ":"), "never_served", env.NeverServe[0])
}
