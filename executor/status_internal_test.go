package executor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

// Once the runtime wrote its last status, nothing writes the file again:
// a rewrite scheduled by an instruction that settled just before would
// otherwise bring back a state dir its owner removed after Run returned.
func TestNothingIsWrittenAfterTheLastStatus(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	path := filepath.Join(t.TempDir(), "status.json")
	f := newStatusFile(path, "dev_1", "http://lane", "epoch", clk, nil)
	f.update(func(s *Status) { s.Connected = true })
	f.soon(func(s *Status) { s.Inflight = []string{"ins_1"} })
	f.last(func(s *Status) { s.Connected, s.Stopped = false, true })
	st, err := ReadStatus(path)
	if err != nil || !st.Stopped || st.Connected {
		t.Fatalf("the last status: %+v %v", st, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.Advance(statusDelay)
	f.update(func(s *Status) { s.Connected = true })
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the status file was written after the last status: %v", err)
	}
}
