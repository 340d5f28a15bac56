package ops

import "syscall"

func statMtime(st *syscall.Stat_t) syscall.Timespec { return st.Mtimespec }

// isOwnProcess: there is no /proc on darwin, nothing to refuse.
func isOwnProcess(int) bool { return false }
