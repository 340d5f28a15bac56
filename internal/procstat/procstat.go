// Package procstat reads the fields of Linux's /proc/<pid>/stat that the
// executor needs to follow processes: their state, parent and group.
package procstat

import (
	"bytes"
	"os"
	"strconv"
)

// Stat is the part of a process's /proc/<pid>/stat line the executor reads.
type Stat struct {
	State byte // R, S, D, Z (zombie), X (dead), ...
	PPID  int
	PGRP  int
}

// Zombie reports whether the process has exited and waits to be reaped.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// Read reads /proc/<pid>/stat. ok is false when the process is gone or the
// line cannot be parsed.
func Read(pid string) (s Stat, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return Parse(b)
}

// Parse parses a stat line: pid (comm) state ppid pgrp ...; comm may hold
// spaces and parentheses, so the fields start after the last ')'.
func Parse(line []byte) (s Stat, ok bool) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := bytes.Fields(line[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return Stat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return Stat{}, false
	}
	return Stat{State: f[0][0], PPID: ppid, PGRP: pgrp}, true
}
