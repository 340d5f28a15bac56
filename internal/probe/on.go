//go:build semaprobe

package probe

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Enabled reports whether this build marks (-tags semaprobe).
const Enabled = true

var (
	mu    sync.Mutex
	held  []byte
	start sync.Once
	file  string // this process's file in $SEMA_PROBE_DIR, set by the first Mark
)

// Mark records that p was passed now. The first mark reads $SEMA_PROBE_DIR
// (nothing is recorded without it) and starts the one goroutine that writes
// the marks out every 100 ms; Flush writes them at once.
func Mark(p Point) {
	now := time.Now().UnixNano()
	start.Do(func() {
		if dir := os.Getenv(DirEnv); dir != "" {
			file = filepath.Join(dir, strconv.Itoa(os.Getpid())+".marks")
			go func() {
				for range time.Tick(100 * time.Millisecond) {
					Flush()
				}
			}()
		}
	})
	if file == "" {
		return
	}
	mu.Lock()
	held = fmt.Appendf(held, "%s %d\n", p, now)
	mu.Unlock()
}

// Flush appends the marks held so far to this process's file.
func Flush() {
	mu.Lock()
	b := held
	held = nil
	mu.Unlock()
	if len(b) == 0 {
		return
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
	}
}
