package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

type procStat struct {
	state byte
	cpu   time.Duration // utime+stime+cutime+cstime: itself and its reaped children
}

// readStat reads /proc/PID/stat (proc(5)): the fields after the command's
// closing parenthesis, state first.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:15] { // utime stime cutime cstime (fields 14–17)
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return procStat{state: f[0][0], cpu: time.Duration(ticks) * clockTick}, nil
}

// children are the pids /proc lists as pid's children, over all its threads.
func children(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// TreeCPU is the CPU time of pid and every live descendant, each with its
// reaped children: a child that ended between two readings is counted in
// its parent's. 0 for pid 0 or a process that is gone.
func TreeCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	st, err := readStat(pid)
	if err != nil {
		return 0
	}
	total := st.cpu
	for _, c := range children(pid) {
		total += TreeCPU(c)
	}
	return total
}

// RSS is VmRSS of /proc/PID/status in bytes (0 if unreadable).
func RSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// RSSSampler reads a process's VmRSS every 20 ms in its own goroutine
// until Stop, which returns the peak.
type RSSSampler struct {
	stop chan struct{}
	done chan struct{}
	peak int64 // the goroutine's until done is closed
}

// SampleRSS starts sampling pid.
func SampleRSS(pid int) *RSSSampler {
	s := &RSSSampler{stop: make(chan struct{}), done: make(chan struct{}), peak: RSS(pid)}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.peak = max(s.peak, RSS(pid))
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the peak.
func (s *RSSSampler) Stop() int64 {
	close(s.stop)
	<-s.done
	return s.peak
}

// SelfCPU is this process's user+system time (the HTTP client rows run
// in it).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
