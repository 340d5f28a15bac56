// Command ratios measures the device lane against local baselines in one
// run and prints them side by side:
//
//	go run ./bench/ratios
//
// Each row is one kind of work: through the lane (the real lane server and
// the real executor over loopback), done locally, and over ssh to
// 127.0.0.1 when an sshd answers without a prompt.
package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sema-agent/sema/bench"
)

func main() {
	testing.Init()
	r, err := bench.NewRig(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer r.Close()
	ssh := bench.SSHAvailable()
	fmt.Printf("%-24s %14s %14s %14s %10s %10s\n", "work", "lane", "local", "ssh", "lane/local", "ssh/lane")
	for _, p := range bench.Pairs {
		laneRes := testing.Benchmark(func(b *testing.B) { p.Lane(b, r) })
		localRes := testing.Benchmark(p.Baseline)
		row := fmt.Sprintf("%-24s %14s %14s", p.Name, show(laneRes), show(localRes))
		ratio := float64(laneRes.NsPerOp()) / float64(localRes.NsPerOp())
		if ssh && p.SSH != nil {
			sshRes := testing.Benchmark(p.SSH)
			row += fmt.Sprintf(" %14s %10.2f %10.2f", show(sshRes), ratio, float64(sshRes.NsPerOp())/float64(laneRes.NsPerOp()))
		} else {
			row += fmt.Sprintf(" %14s %10.2f %10s", "-", ratio, "-")
		}
		fmt.Println(row)
	}
	if !ssh {
		fmt.Println("ssh: no sshd answered on 127.0.0.1 without a prompt; ssh columns left out")
	}
}

// show is time per op, and throughput where bytes were set.
func show(r testing.BenchmarkResult) string {
	if r.N == 0 {
		return "failed"
	}
	if r.Bytes > 0 {
		mbs := float64(r.Bytes) * float64(r.N) / r.T.Seconds() / 1e6
		return fmt.Sprintf("%.0f MB/s", mbs)
	}
	return time.Duration(r.NsPerOp()).Round(time.Microsecond).String()
}
