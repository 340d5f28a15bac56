//go:build linux || darwin

package ops

import (
	"os"
	"strconv"
	"syscall"
)

// regularFileID is the identity of the regular file at p (through
// symlinks); ok is false when p is absent or not a regular file.
func regularFileID(p string) (id fileID, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileID{}, false
	}
	return statID(&st), true
}

// statID is the identity in a stat result.
func statID(st *syscall.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// isOwnThread reports whether tid is a thread of this process: Linux lists
// a process's threads in /proc/self/task, and /proc/<tid> shows the process
// itself. Elsewhere there is no /proc and nothing to refuse.
func isOwnThread(tid int) bool {
	_, err := os.Lstat("/proc/self/task/" + strconv.Itoa(tid))
	return err == nil
}
