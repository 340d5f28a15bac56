package executor

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sema-agent/sema/executor/ops"
)

// stagingRegistry records, in the state dir, each staging file a write has
// beside its target while its payload arrives, so that an executor started
// after a crash can remove what the dead one left: every failure of a write
// removes its staging file, but a SIGKILL cannot, and a half-written file
// must not stay (§3.4). A record names the file's path and its identity
// (device and inode), so a file that is not that very staging file is
// never removed.
type stagingRegistry struct {
	dir string // "" disables the registry
	log *slog.Logger
}

// add records a staging file; the func it returns forgets it (nil when
// nothing was recorded).
func (r stagingRegistry) add(path string, dev, ino uint64) func() {
	if r.dir == "" {
		return nil
	}
	var n [8]byte
	_, _ = rand.Read(n[:]) // never fails (crypto/rand)
	name := hex.EncodeToString(n[:])
	if err := writeRecord(r.dir, name, []byte(fmt.Sprintf("%d %d %s\n", dev, ino, path))); err != nil {
		r.log.Warn("cannot record a staging file", "err", err)
		return nil
	}
	rec := filepath.Join(r.dir, name)
	return func() { os.Remove(rec) }
}

// sweep removes every recorded staging file that is still the same file
// (same device and inode, a staging file's name), and forgets all records.
// It runs before the first hello: the files belong to a previous executor
// process, whose writes were never committed.
func (r stagingRegistry) sweep() (removed int) {
	if r.dir == "" {
		return 0
	}
	drainRecords(r.dir, func(_ string, rec []byte) {
		if path, ok := stagedFile(string(rec)); ok && os.Remove(path) == nil {
			removed++
			r.log.Warn("removed a write's staging file left by a previous executor process", "path", path)
		}
	})
	return removed
}

// stagedFile parses a record "DEV INO PATH\n" and reports whether PATH is
// still that object, a regular file with a staging file's name.
func stagedFile(rec string) (string, bool) {
	devS, rest, _ := strings.Cut(strings.TrimSuffix(rec, "\n"), " ")
	inoS, path, _ := strings.Cut(rest, " ")
	dev, err1 := strconv.ParseUint(devS, 10, 64)
	ino, err2 := strconv.ParseUint(inoS, 10, 64)
	if err1 != nil || err2 != nil || !filepath.IsAbs(path) || !ops.IsStagingName(filepath.Base(path)) {
		return "", false
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uint64(st.Dev) != dev || st.Ino != ino { // Dev: int32 on darwin
		return "", false
	}
	return path, true
}
