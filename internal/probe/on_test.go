//go:build semaprobe

package probe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A probe build writes each mark as "point unix-nanoseconds" to its
// process's file in $SEMA_PROBE_DIR.
func TestMarksAreWrittenToTheProcesssFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	before := time.Now().UnixNano()
	Mark(ClientSend)
	Mark(ClientDone)
	Flush()
	b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(os.Getpid())+".marks"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("marks %q, want two lines", b)
	}
	for i, want := range []Point{ClientSend, ClientDone} {
		name, at, _ := strings.Cut(lines[i], " ")
		ns, err := strconv.ParseInt(at, 10, 64)
		if Point(name) != want || err != nil || ns < before {
			t.Errorf("line %d = %q, want %s and a time after %d", i+1, lines[i], want, before)
		}
	}
}
