package executor

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
)

// bootID is this boot's random id (/proc/sys/kernel/random/boot_id). It
// cannot change while this process lives, so it is read once: every exec
// records it.
var bootID = sync.OnceValues(readBootID)

func readBootID() (string, bool) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// startTime is pid's start time in clock ticks since boot (/proc/PID/stat
// field 22).
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces; the fields after it do not.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true // field 22 overall
}
