package executor

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// procRegistry records the process group of every running command in the
// state dir, so that an executor started after a crash can kill what the
// dead one left running: its fence cannot see work from another process,
// and nothing may outlive its instruction (§8, DESIGN). A record names the
// boot and the leader's start time, so a group id reused by an unrelated
// process (after a reboot, or after the group ended) is never touched.
type procRegistry struct {
	dir string // "" disables the registry
	log *slog.Logger
}

// record is what identifies one group: this boot, and its leader's start
// time (orphans_linux.go, orphans_darwin.go). ok is false where the
// platform cannot tell, or the leader is already gone: then nothing is
// recorded, and nothing is ever killed on the strength of a bare number.
func record(pgid int) (string, bool) {
	boot, ok := bootID()
	if !ok {
		return "", false
	}
	start, ok := startTime(pgid)
	if !ok {
		return "", false
	}
	return boot + " " + start + "\n", true
}

func (r procRegistry) path(pgid int) string { return filepath.Join(r.dir, strconv.Itoa(pgid)) }

// add records a running group.
func (r procRegistry) add(pgid int) {
	if r.dir == "" {
		return
	}
	rec, ok := record(pgid)
	if !ok {
		return // the platform cannot tell, or already gone: nothing to kill later
	}
	if err := writeRecord(r.dir, strconv.Itoa(pgid), []byte(rec)); err != nil {
		r.log.Warn("cannot record a running process group", "pgid", pgid, "err", err)
	}
}

// remove forgets a group that ended.
func (r procRegistry) remove(pgid int) {
	if r.dir != "" {
		os.Remove(r.path(pgid))
	}
}

// reapOrphans kills every recorded group that is still the same group (same
// boot, same leader start time), and forgets all records. It runs before
// the first hello: the groups belong to a previous executor process.
func (r procRegistry) reapOrphans() (killed int) {
	if r.dir == "" {
		return 0
	}
	drainRecords(r.dir, func(name string, want []byte) {
		pgid, err := strconv.Atoi(name)
		if err != nil || pgid <= 1 {
			return
		}
		if now, ok := record(pgid); ok && now == string(want) {
			if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
				killed++
				r.log.Warn("killed a command left running by a previous executor process", "pgid", pgid)
			}
		}
	})
	return killed
}
