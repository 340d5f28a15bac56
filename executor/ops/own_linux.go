package ops

import (
	"os"
	"strconv"
	"syscall"

	"github.com/sema-agent/sema/internal/procstat"
)

func statMtime(st *syscall.Stat_t) syscall.Timespec { return st.Mtim }

// isOwnProcess reports whether n, a number in /proc, is this process: one
// of its threads (/proc/<tid> shows the process itself), or a process it
// started, however deep (a command's environment, memory and descriptors
// are the executor's to keep, too). A process whose parent chain cannot be
// read to its end is taken for ours: never serve what cannot be told.
func isOwnProcess(n int) bool {
	if isOwnThread(n) {
		return true
	}
	self := os.Getpid()
	pid := n
	for range 256 { // deeper than any real tree
		st, ok := procstat.Read(strconv.Itoa(pid))
		if !ok {
			return false // gone: nothing there to serve
		}
		switch {
		case st.PPID == self:
			return true
		case st.PPID <= 1:
			return false
		}
		pid = st.PPID
	}
	return true
}
