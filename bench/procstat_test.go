package bench

import (
	"os"
	"testing"
	"time"
)

func TestQuantileIsTheNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.5: 50, 0.99: 99, 1: 100, 0: 1} {
		if got := Quantile(ds, q); got != want {
			t.Errorf("Quantile(1..100, %v) = %d, want %d", q, got, want)
		}
	}
	if Quantile(nil, 0.5) != 0 || Quantile([]time.Duration{7}, 0.99) != 7 {
		t.Error("the quantile of none or one")
	}
	if ds[0] != 100 {
		t.Error("Quantile sorted its argument in place")
	}
}

// The /proc readers see this very process: alive (its main thread may be
// asleep while another runs the test), with memory, and with CPU time
// once it has spun a little.
func TestProcReadersSeeThisProcess(t *testing.T) {
	for t0 := time.Now(); time.Since(t0) < 30*time.Millisecond; {
	}
	st, err := readStat(os.Getpid())
	if err != nil || st.state == 'Z' || st.state == 'X' || st.state == 0 {
		t.Fatalf("readStat(self): %+v, %v", st, err)
	}
	if TreeCPU(os.Getpid()) <= 0 || RSS(os.Getpid()) <= 0 || SelfCPU() <= 0 {
		t.Errorf("cpu %v, rss %d, self %v", TreeCPU(os.Getpid()), RSS(os.Getpid()), SelfCPU())
	}
	if TreeCPU(0) != 0 || RSS(-1) != 0 {
		t.Error("a pid that is no process")
	}
}

func TestTailWriterKeepsTheEnd(t *testing.T) {
	w := &tailWriter{n: 10}
	w.Write([]byte("hello "))
	w.Write([]byte("world\n  again"))
	if got := w.String(); got != "ld again" {
		t.Errorf("tail %q", got)
	}
}
