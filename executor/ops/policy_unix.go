//go:build linux || darwin

package ops

import (
	"os"
	"strconv"
	"syscall"
)

// statID is the identity in a stat result.
func statID(st *syscall.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// isOwnThread reports whether tid is a thread of this process: Linux lists
// a process's threads in /proc/self/task, and /proc/<tid> shows the process
// itself.
func isOwnThread(tid int) bool {
	_, err := os.Lstat("/proc/self/task/" + strconv.Itoa(tid))
	return err == nil
}
