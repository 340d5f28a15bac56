package executor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bootID is this boot's time, sysctl kern.boottime, to the microsecond. The
// kernel moves it when the clock is stepped; a record then no longer
// matches and its group is not killed: the sweep errs on the side of
// leaving a process alone, never of killing a stranger.
func bootID() (string, bool) {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil || tv.Sec == 0 {
		return "", false
	}
	return fmt.Sprintf("boot@%d.%06d", tv.Sec, tv.Usec), true
}

// startTime is pid's start time, sysctl KERN_PROC_PID (kinfo_proc
// p_starttime), to the microsecond.
func startTime(pid int) (string, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid {
		return "", false
	}
	st := kp.Proc.P_starttime
	if st.Sec == 0 {
		return "", false
	}
	return fmt.Sprintf("%d.%06d", st.Sec, st.Usec), true
}
