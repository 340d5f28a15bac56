// Command ratios measures the device lane against baselines in one run
// and prints them side by side:
//
//	go run ./bench/ratios [-size 1G] [-rounds 1] [-rows all] [-inprocess=true] [-markdown]
//
// The user's-path rows (bench.UserRows) build the sema binary once, start
// a real `sema server` and a real `sema device serve` as child processes on
// loopback and drive them as a user does — the `sema` CLI, or a plain HTTP
// client — beside ssh to 127.0.0.1 over one multiplexed connection
// (ControlMaster): the machine's sshd when it lets this user in without a
// prompt, else a throwaway sshd the runner starts from /usr/sbin/sshd. The
// in-process pairs (the lane and the executor in this process, through
// Call.Next, which no user touches) are kept beside them.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/bench"
)

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, c))
}

func run(ctx context.Context, c config) int {
	fmt.Printf("sema ratios, %s UTC: %s, %d CPUs, %s; N = %s, %d round(s)\n",
		time.Now().UTC().Format("2006-01-02 15:04"), cpuModel(), runtime.NumCPU(), runtime.Version(), bench.FormatSize(c.size), c.rounds)
	ssh, err := bench.OpenSSH()
	if err != nil {
		fmt.Printf("ssh: %v; ssh columns left out\n", err)
		ssh = nil
	} else {
		defer ssh.Close()
		bench.UseSSH(ssh)
		defer bench.UseSSH(nil)
		who := "the machine's sshd on port 22"
		if ssh.Own {
			who = "a throwaway sshd (" + bench.SSHDPath + ") on loopback"
		}
		fmt.Printf("ssh: %s, one ControlMaster connection, cipher %s (both sides' defaults)\n", who, ssh.Cipher)
	}
	if c.inprocess {
		if code := inProcess(ctx); code != 0 {
			return code
		}
	}
	if len(c.rows) == 0 {
		return 0
	}
	return userPath(ctx, c, ssh)
}

func userPath(ctx context.Context, c config, ssh *bench.SSH) int {
	bench.ExtraServerFlags = c.server
	var envs []*bench.Env
	for _, tls := range c.tls {
		start, how := bench.StartUserPath, "plain HTTP"
		if tls {
			start, how = bench.StartUserPathTLS, "HTTPS (--tls-cert/--tls-key, a throwaway self-signed certificate the executor and the CLI trust through SSL_CERT_FILE)"
		}
		fmt.Printf("\nuser's path on %s: building sema, starting `sema server` and `sema device serve`…\n", how)
		u, err := start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ratios:", err)
			return 1
		}
		defer u.Close()
		envs = append(envs, bench.NewEnv(u, ssh, c.size, c.trips))
	}
	var entries []entry
	for _, r := range bench.UserRows {
		for _, id := range c.rows {
			if r.ID == id {
				for _, e := range envs {
					entries = append(entries, entry{row: r, env: e})
				}
			}
		}
	}
	var rounds [][]bench.Measure
	for i := range c.rounds {
		var ms []bench.Measure
		for _, en := range entries {
			if ctx.Err() != nil {
				return 130
			}
			ms = append(ms, en.row.Run(ctx, en.env))
		}
		rounds = append(rounds, ms)
		fmt.Printf("\nround %d of %d:\n", i+1, c.rounds)
		roundTable(entries, c.size, ms).print(os.Stdout, c.markdown)
		notes(os.Stdout, entries, c.size, ms)
	}
	if c.rounds > 1 {
		fmt.Printf("\nmedian of %d rounds (range in parentheses):\n", c.rounds)
		medianTable(entries, c.size, rounds).print(os.Stdout, c.markdown)
	}
	return 0
}

// entry is one row on one lane: plain HTTP, or HTTPS when its env's
// server has a certificate.
type entry struct {
	row bench.UserRow
	env *bench.Env
}

func (en entry) tls() bool { return en.env.U.CertFile != "" }

// id is the row's number, with "tls" for the HTTPS lane.
func (en entry) id() string {
	if en.tls() {
		return en.row.ID + " tls"
	}
	return en.row.ID
}

// work is what the lane side runs, and over what.
func (en entry) work() string {
	if en.tls() {
		return en.row.Work + " over https/wss"
	}
	return en.row.Work
}

// inProcess is the pairs of bench.Pairs, as before: lane and executor in
// this process against local work and ssh.
func inProcess(ctx context.Context) int {
	testing.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) // the rig's enrollment note
	r, err := bench.NewRig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		return 1
	}
	defer r.Close()
	ssh := bench.SSHAvailable()
	fmt.Println("\nin-process (the lane and the executor in this process, through Call.Next; not the user's path):")
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
	return 0
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

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
