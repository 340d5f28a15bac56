// Command forward measures what the hop between two lane replicas costs:
// a real `sema server` on PostgreSQL holding a real
// `sema device serve`, a second `sema server` on the same registry that
// holds nothing, and the same work sent to each — a local dispatch, and
// one the second replica forwards to the first — in one run: an exec true
// round trip, a stream of N bytes of stdout, and a put of N bytes:
//
//	./scripts/with-postgres go run ./bench/forward [-size 1G] [-trips 500] [-rounds 3]
//
// (make forward). The PostgreSQL is -postgres, else $SEMA_TEST_POSTGRES
// (what scripts/with-postgres sets); the run works in a schema of its own,
// dropped at the end.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/sema-agent/sema/bench"
)

type config struct {
	postgres string
	size     int64
	trips    int
	rounds   int
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(errOut)
	pg := fs.String("postgres", os.Getenv("SEMA_TEST_POSTGRES"), "the PostgreSQL the replicas share (default $SEMA_TEST_POSTGRES; ./scripts/with-postgres starts a throwaway one)")
	size := fs.String("size", "1G", "bytes of the stream row: a whole number with K, M, G or T (binary units)")
	trips := fs.Int("trips", 500, "round trips of the exec true row, through each replica")
	rounds := fs.Int("rounds", 3, "runs of both rows; each is printed")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	c := config{postgres: *pg, trips: *trips, rounds: *rounds}
	var err error
	if c.size, err = bench.ParseSize(*size); err != nil {
		return config{}, fmt.Errorf("-size: %v", err)
	}
	if c.postgres == "" {
		return config{}, errors.New("no PostgreSQL: give -postgres URL, or run it as `./scripts/with-postgres go run ./bench/forward` (make forward)")
	}
	if c.trips < 1 || c.rounds < 1 {
		return config{}, fmt.Errorf("-trips %d, -rounds %d: each at least 1", c.trips, c.rounds)
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	pg, drop, err := freshSchema(ctx, c.postgres)
	if err != nil {
		return err
	}
	defer drop()
	fmt.Printf("sema forward, %s UTC: %d CPUs, %s; N = %s, %d trips, %d round(s)\n",
		time.Now().UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), runtime.Version(), bench.FormatSize(c.size), c.trips, c.rounds)
	fmt.Println("building sema, starting two `sema server --postgres` replicas and `sema device serve` on the first…")
	u, err := bench.StartUserPathOn(ctx, pg)
	if err != nil {
		return err
	}
	defer u.Close()
	rep, err := u.StartReplica()
	if err != nil {
		return err
	}
	other := u.Via(rep.URL)
	e := bench.NewEnv(u, nil, c.size, c.trips)
	hc := e.HTTP
	before, err := bench.Forwarded(ctx, hc, rep.URL)
	if err != nil {
		return err
	}
	for i := range c.rounds {
		rows := []bench.HopMeasure{
			bench.HopExecTrue(ctx, hc, u, other, c.trips),
			bench.HopStream(ctx, hc, u, other, rep.PID(), c.size),
			bench.HopPut(ctx, e, other),
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Printf("\nround %d of %d:\n", i+1, c.rounds)
		printRows(os.Stdout, rows)
	}
	// Every forwarded request went through the hop: the second replica
	// counted each one.
	after, err := bench.Forwarded(ctx, hc, rep.URL)
	if err != nil {
		return err
	}
	want := int64(c.rounds * (c.trips + 2))
	fmt.Printf("\nthe second replica forwarded %d requests (want %d)\n", after-before, want)
	if after-before != want {
		return fmt.Errorf("the second replica forwarded %d requests, not %d: the forwarded column did not all go through the hop", after-before, want)
	}
	return nil
}

func printRows(w io.Writer, rows []bench.HopMeasure) {
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", "work", "local (the holder)", "forwarded (another replica)", "the hop costs", "goal", "met")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, m := range rows {
		local, fwd, cost := show(m, m.Local), show(m, m.Forwarded), "-"
		if m.Local.Err == nil && m.Forwarded.Err == nil {
			if m.Bytes > 0 {
				cost = fmt.Sprintf("%.1f%% of the rate", 100*(1-m.Local.Time.Seconds()/m.Forwarded.Time.Seconds()))
			} else {
				cost = fmt.Sprintf("%+.3f ms (p50), %+.3f ms (p99)", ms(m.Forwarded.Time-m.Local.Time), ms(m.Forwarded.P99-m.Local.P99))
			}
		}
		met := "no"
		if m.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m.Work, local, fwd, cost, m.Goal, met)
	}
	for _, m := range rows {
		for _, side := range []struct {
			name string
			r    bench.Result
		}{{"local", m.Local}, {"forwarded", m.Forwarded}} {
			if side.r.Err != nil {
				fmt.Fprintf(w, "  %s, %s: %v\n", m.Work, side.name, side.r.Err)
			} else if len(side.r.CPU) > 0 {
				fmt.Fprintf(w, "  %s, %s: CPU %s\n", m.Work, side.name, side.r.CPU)
			}
		}
		if m.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", m.Work, m.Note)
		}
	}
}

func show(m bench.HopMeasure, r bench.Result) string {
	switch {
	case r.Err != nil:
		return "failed"
	case m.Bytes > 0:
		return fmt.Sprintf("%.0f MB/s", float64(m.Bytes)/r.Time.Seconds()/1e6)
	default:
		return fmt.Sprintf("%.3f ms (p99 %.3f)", ms(r.Time), ms(r.P99))
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// freshSchema makes a schema of its own on the PostgreSQL at base and
// returns base with its search_path set to it, and a func that drops it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	db, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, fmt.Errorf("-postgres: %v", err)
	}
	schema := "bench_" + strings.ToLower(rand.Text())
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("creating a schema on the PostgreSQL: %v", err)
	}
	drop := func() {
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
		db.Close()
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, fmt.Errorf("-postgres: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}
