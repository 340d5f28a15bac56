// Package pidlock is a single-instance lock on a file: flock(LOCK_EX|LOCK_NB),
// which the kernel releases when the holding process dies, however it dies.
// The holder writes its pid in the file so that the next process can name
// it; the lock, not the content, is what excludes.
package pidlock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// HeldError means another process (or another open of the file in this
// one) holds the lock.
type HeldError struct {
	Path string
	PID  int // the holder's pid as it recorded it; 0 if unknown
}

func (e *HeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s holds the lock %s", holder, e.Path)
}

// Lock is a held lock.
type Lock struct {
	f    *os.File
	path string
}

// Acquire takes the lock on path (created 0600 when absent) without
// waiting; *HeldError at once when another holds it.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return nil, &HeldError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, path: path}, nil
}

// Path is the lock file's path, also after Release.
func (l *Lock) Path() string { return l.path }

// Release drops the lock and clears the recorded pid. It is idempotent.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	l.f.Close() // closing the descriptor releases the flock
	l.f = nil
}
