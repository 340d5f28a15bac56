// Command sandboxcost measures what the command sandbox and the device's
// journal cost on the user's path: a real `sema server` and `sema device
// serve`, the device's serve restarted round after round with --sandbox
// workspace-write (the default), --sandbox off and --journal=false, `exec
// true` round trips through the HTTP API with a keep-alive client under
// each, side by side; then an ordinary developer loop (git, go build, go
// test) through `sema run` in and out of the sandbox:
//
//	go run ./bench/sandboxcost [-trips 300] [-rounds 4] [-unconfined-bin PATH]
//
// -unconfined-bin adds a serve of another sema binary, one built before the
// sandbox existed, whose commands run with no sandbox at all.
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
)

func main() {
	trips := flag.Int("trips", 300, "round trips per mode and round")
	rounds := flag.Int("rounds", 4, "rounds, each mode once a round")
	unconfined := flag.String("unconfined-bin", "", "a sema binary built before the sandbox, to compare with too")
	flag.Parse()
	if *trips < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "sandboxcost: -trips and -rounds must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *trips, *rounds, *unconfined); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxcost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, trips, rounds int, unconfined string) error {
	fmt.Printf("sema sandboxcost, %s UTC: building sema, starting `sema server` and `sema device serve`…\n",
		time.Now().UTC().Format("2006-01-02 15:04"))
	u, err := bench.StartUserPath(ctx)
	if err != nil {
		return err
	}
	defer u.Close()
	modes := []string{"workspace-write", "off"}
	variants := []bench.ServeVariant{
		{Name: "--sandbox workspace-write (default)", Flags: []string{"--sandbox", "workspace-write"}},
		{Name: "--sandbox off", Flags: []string{"--sandbox", "off"}},
		{Name: "--journal=false (the default sandbox, no journal)", Flags: []string{"--journal=false"}},
	}
	if unconfined != "" {
		variants = append(variants, bench.ServeVariant{Name: "no sandbox (" + unconfined + ")", Bin: unconfined})
	}
	got, err := bench.SandboxTrips(ctx, u, variants, rounds, trips)
	if err != nil {
		return err
	}
	fmt.Printf("\n`exec true` round trips through the HTTP API, %d per serve (%d rounds, interleaved):\n\n", trips*rounds, rounds)
	fmt.Println("| serve | p50 | p90 | p99 | p50 vs default |")
	fmt.Println("|---|---|---|---|---|")
	def := bench.Quantile(got[variants[0].Name], 0.5)
	for _, v := range variants {
		d := got[v.Name]
		p50 := bench.Quantile(d, 0.5)
		fmt.Printf("| %s | %s | %s | %s | %.2f× |\n", v.Name, ms(p50), ms(bench.Quantile(d, 0.9)), ms(bench.Quantile(d, 0.99)), float64(def)/float64(p50))
	}
	fmt.Printf("\nThe default's p50 is %.2f× --sandbox off's (goal ≤ 1.3×)\n", float64(def)/float64(bench.Quantile(got[variants[1].Name], 0.5)))
	fmt.Printf("The journal costs the default %+.1f%% at p50 (goal ≤ +5%%)\n", 100*(float64(def)/float64(bench.Quantile(got[variants[2].Name], 0.5))-1))
	if unconfined != "" {
		fmt.Printf("The default's p50 is %.2f× the unconfined binary's\n", float64(def)/float64(bench.Quantile(got[variants[3].Name], 0.5)))
	}

	fmt.Printf("\nAn ordinary developer loop through `sema run` in the workspace:\n\n")
	fmt.Println("| step | workspace-write | off |")
	fmt.Println("|---|---|---|")
	results := map[string][]string{}
	failed := false
	// A first run, not shown, fills the Go build cache, so that neither
	// mode pays for it.
	if err := u.RestartServe(ctx, "--sandbox", "off"); err != nil {
		return err
	}
	bench.RunDevLoop(ctx, u)
	for _, m := range modes {
		if err := u.RestartServe(ctx, "--sandbox", m); err != nil {
			return err
		}
		times, errs := bench.RunDevLoop(ctx, u)
		for i := range bench.DevLoop {
			cell := ms(times[i])
			if errs[i] != nil {
				cell = "FAILED: " + errs[i].Error()
				failed = true
			}
			results[m] = append(results[m], cell)
		}
	}
	for i, step := range bench.DevLoop {
		fmt.Printf("| %s | %s | %s |\n", step.Name, results["workspace-write"][i], results["off"][i])
	}
	if failed {
		return fmt.Errorf("a step of the developer loop failed")
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
