// Command fleet measures the lane with a fleet of devices connected,
// through the path users take: a real `sema server` child
// process with its SQLite registry, one real `sema device serve`, and N
// devices as goroutines in this process speaking the real protocol (their
// own keys, signed hellos, generationAck, heartbeats at the lane's
// interval), dialing all at once from several loopback source addresses.
//
//	go run ./bench/fleet -devices 15000 [-idle 60s] [-sources 4] [-trips 300]
//
// It prints the lane's process RSS per connected device (VmRSS, not the Go
// heap), its idle CPU with the fleet connected, the burst's connect time and
// handshake percentiles and refusals, and an `exec true` round trip through
// the HTTP API to the real executor beside a local `sh -c true`.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/sema-agent/sema/bench"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

func main() {
	devices := flag.Int("devices", 1000, "devices to connect (this machine allows 20,000 open files per process)")
	idle := flag.Duration("idle", 60*time.Second, "how long to measure the lane's idle CPU with the fleet connected (at least one heartbeat interval, 15 s by default)")
	sources := flag.Int("sources", 64, "loopback source addresses to dial from (127.0.0.2 …): real devices come from many addresses, and the lane caps the handshakes in progress per address (16) and in all (1024)")
	trips := flag.Int("trips", 300, "exec true round trips")
	useTLS := flag.Bool("tls", false, "the lane on --tls-cert/--tls-key (a throwaway self-signed certificate), the devices on wss://")
	flag.Parse()
	if *devices < 1 || *sources < 1 || *trips < 1 || *idle < time.Second {
		fmt.Fprintln(os.Stderr, "fleet: -devices, -sources and -trips must be positive, -idle at least 1s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *devices, *idle, *sources, *trips, *useTLS); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, idle time.Duration, sources, trips int, useTLS bool) error {
	start, over := bench.StartUserPath, "ws://"
	if useTLS {
		start, over = bench.StartUserPathTLS, "wss:// (--tls-cert/--tls-key)"
	}
	fmt.Printf("sema fleet, %s: %d devices, %d source addresses, over %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), n, sources, over)
	u, err := start(ctx)
	if err != nil {
		return err
	}
	defer u.Close()
	st, err := sqlite.Open(ctx, u.DataDir())
	if err != nil {
		return err
	}
	t0 := time.Now()
	fleet, err := bench.RegisterFleet(ctx, st, n)
	st.Close()
	if err != nil {
		return fmt.Errorf("registering the fleet: %w", err)
	}
	fmt.Printf("registered %d devices in %s\n", n, time.Since(t0).Round(time.Millisecond))
	pid := u.ServerPID()
	rss0 := bench.RSS(pid)

	fctx, disconnect := context.WithCancel(ctx)
	defer disconnect()
	t0 = time.Now()
	hs := bench.ConnectFleet(fctx, strings.Replace(u.URL, "http", "ws", 1)+"/v1/device/ws", fleet, sourceIPs(sources), u.Transport().TLSClientConfig)
	burst := time.Since(t0)
	ok, took, refusals := tally(hs)
	retries, redials := 0, 0
	for _, h := range hs {
		retries, redials = retries+h.Retries, redials+h.Redials
	}
	fmt.Printf("burst: %d of %d in within %s (%d refused or failed; retried: %d upgrades answered 503, %d connections closed unanswered)\n",
		ok, n, burst.Round(time.Millisecond), n-ok, retries, redials)
	for reason, count := range refusals {
		fmt.Printf("  %d× %s\n", count, reason)
	}
	if ok == 0 {
		return fmt.Errorf("no device got in")
	}
	var admitted []time.Duration
	for _, h := range hs {
		if h.Err == nil {
			admitted = append(admitted, h.Admitted)
		}
	}
	fmt.Printf("time to get in (first dial to helloAck, retries included): p50 %s, p99 %s, max %s\n", ms(bench.Quantile(took, 0.5)), ms(bench.Quantile(took, 0.99)), ms(slices.Max(took)))
	fmt.Printf("handshake once admitted (the last dial to helloAck): p50 %s, p99 %s, max %s\n", ms(bench.Quantile(admitted, 0.5)), ms(bench.Quantile(admitted, 0.99)), ms(slices.Max(admitted)))

	time.Sleep(5 * time.Second) // the activations and the first lease writes settle
	rss1 := bench.RSS(pid)
	cpu0, w0 := bench.TreeCPU(pid), time.Now()
	time.Sleep(idle)
	cpu1, window := bench.TreeCPU(pid), time.Since(w0)
	rss2 := bench.RSS(pid)
	core := float64(cpu1-cpu0) / float64(window) * 100
	fmt.Printf("lane RSS: %s idle before the fleet, %s with it connected, %s after %s idle\n", mib(rss0), mib(rss1), mib(rss2), idle)
	fmt.Printf("lane RSS per connected device: %.1f KiB (goal ≤ 30 KiB)\n", float64(rss2-rss0)/float64(ok)/1024)
	fmt.Printf("lane idle CPU: %.2f %% of a core over %s = %.2f %% per 1,000 devices (goal ≤ 0.5 %%)\n", core, window.Round(time.Second), core/(float64(ok)/1000))

	env := bench.NewEnv(u, nil, 0, trips)
	for _, row := range bench.UserRows {
		if row.ID != "5" {
			continue
		}
		m := row.Run(ctx, env)
		if m.Lane.Err != nil || m.Base.Err != nil {
			return fmt.Errorf("exec true: %v %v", m.Lane.Err, m.Base.Err)
		}
		fmt.Printf("exec true round trip with the fleet connected (HTTP keep-alive, %d trips): p50 %s, p99 %s; local sh -c true p50 %s, p99 %s; ratio %.2f×\n",
			trips, ms(m.Lane.Time), ms(m.Lane.P99), ms(m.Base.Time), ms(m.Base.P99), float64(m.Lane.Time)/float64(m.Base.Time))
	}
	return nil
}

// sourceIPs are 127.0.0.2, 127.0.0.3 …: the whole of 127/8 is local.
func sourceIPs(n int) []net.IP {
	ips := make([]net.IP, n)
	for i := range ips {
		ips[i] = net.IPv4(127, 0, byte((2+i)>>8), byte(2+i))
	}
	return ips
}

// tally counts the devices that got in, their handshake times, and why the
// others did not.
func tally(hs []bench.Handshake) (ok int, took []time.Duration, refusals map[string]int) {
	refusals = map[string]int{}
	for _, h := range hs {
		if h.Err != nil {
			refusals[clip(h.Err.Error())]++
			continue
		}
		ok++
		took = append(took, h.Took)
	}
	return ok, took, refusals
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
