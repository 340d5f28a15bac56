// Command stages says where an `exec true` round trip's time goes on the
// user's path. It builds sema with -tags semaprobe, starts
// a real `sema server` and `sema device serve`, sends round trips of
// `exec true` with a keep-alive HTTP client, and prints, for each step from
// one probe point to the next (internal/probe), the median and the 90th
// percentile over the trips, from the marks all three processes wrote:
//
//	go run -tags semaprobe ./bench/stages [-trips 2000] [-warmup 300]
//
// The marks are timestamps of the machine's clock, which the three
// processes share. A normal build of sema marks nothing and costs nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sema-agent/sema/bench"
	"github.com/sema-agent/sema/internal/probe"
)

func main() {
	trips := flag.Int("trips", 2000, "round trips measured")
	warmup := flag.Int("warmup", 300, "round trips sent first and left out")
	flag.Parse()
	if *trips < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "stages: -trips must be at least 1 and -warmup at least 0")
		os.Exit(2)
	}
	if !probe.Enabled {
		fmt.Fprintln(os.Stderr, "stages: this runner marks nothing: run it as go run -tags semaprobe ./bench/stages")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *trips, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "stages:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, trips, warmup int) error {
	dir, err := os.MkdirTemp("", "sema-stages-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Inherited by the server and the device; read by this process's probe
	// at its first mark.
	os.Setenv(probe.DirEnv, dir)
	fmt.Printf("sema stages, %s UTC: building sema -tags semaprobe, starting `sema server` and `sema device serve`…\n",
		time.Now().UTC().Format("2006-01-02 15:04"))
	u, err := bench.StartUserPathTagged(ctx, "semaprobe")
	if err != nil {
		return err
	}
	err = bench.ProbeExecTrue(ctx, u, warmup+trips)
	probe.Flush()
	time.Sleep(300 * time.Millisecond) // the children flush every 100 ms
	u.Close()
	if err != nil {
		return err
	}
	marks, err := bench.ReadMarks(dir)
	if err != nil {
		return err
	}
	stages, complete := bench.Stages(marks, probe.Trip, warmup)
	if complete == 0 {
		return fmt.Errorf("no trip passed every point (marks of %d points in %s)", len(marks), dir)
	}
	fmt.Printf("\n%d of %d round trips of `exec true` passed every point:\n\n", complete, trips)
	fmt.Printf("%-22s %-22s %10s %10s\n", "from", "to", "p50", "p90")
	var total time.Duration
	for _, s := range stages {
		fmt.Printf("%-22s %-22s %8.1f µs %8.1f µs\n", s.From, s.To, us(s.P50), us(s.P90))
		total += s.P50
	}
	fmt.Printf("%-45s %8.1f µs (the sum of the medians)\n", "client.send → client.done", us(total))
	return nil
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
