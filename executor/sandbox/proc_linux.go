package sandbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"

	"github.com/sema-agent/sema/internal/procstat"
)

// orphans lists the children of the executor's main thread: where the
// kernel puts every orphan of a command, since a subreaper's orphans go to
// its first live thread, the main one, which a Go program never ends (and
// where the children of a domain thread go when it ends). Where the kernel
// has no children file (CONFIG_PROC_CHILDREN), every process whose parent
// the executor is.
func orphans() ([]int, error) {
	pid := strconv.Itoa(os.Getpid())
	b, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
	if errors.Is(err, fs.ErrNotExist) {
		return childrenByScan()
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// childrenByScan finds the executor's children in every /proc/<pid>/stat.
func childrenByScan() ([]int, error) {
	names, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, e := range names {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procstat.Read(e.Name()); ok && st.PPID == self {
			out = append(out, pid)
		}
	}
	return out, nil
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	st, ok := procstat.Read(strconv.Itoa(pid))
	return ok && st.Zombie()
}
