package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sema-agent/sema/bench"
)

// config is what the flags ask for.
type config struct {
	size      int64    // bytes per throughput run (-size)
	rounds    int      // runs of every user's-path row (-rounds)
	rows      []string // the user's-path rows by id (-rows), in table order
	inprocess bool     // the in-process pairs too (-inprocess)
	markdown  bool     // tables as markdown (-markdown)
	trips     int      // round trips of the exec true row (-trips)
	tls       []bool   // the lanes the rows run on (-tls): plain HTTP, HTTPS, in this order
	server    []string // more flags for `sema server` (-server-flag, repeated)
}

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func parseFlags(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("ratios", flag.ContinueOnError)
	fs.SetOutput(errOut)
	size := fs.String("size", "1G", "bytes per throughput run: a whole number with K, M, G or T (binary units), e.g. 64M")
	rounds := fs.Int("rounds", 1, "runs of every user's-path row; each round is printed, then the median")
	rows := fs.String("rows", "all", "the user's-path rows to run, by number (e.g. 1,3), all, or none")
	inproc := fs.Bool("inprocess", true, "also run the in-process pairs (lane and executor in this process, through Call.Next)")
	md := fs.Bool("markdown", false, "print the tables as markdown, for the README")
	trips := fs.Int("trips", 300, "round trips of the exec true row")
	var server repeated
	fs.Var(&server, "server-flag", "one more flag for `sema server`, e.g. -server-flag=--payload-part-bytes=524288 (repeat for more)")
	tlsFlag := fs.String("tls", "both", "the lane the rows run on: off (http:// and ws://), on (--tls-cert/--tls-key: https:// and wss://), or both")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	c := config{rounds: *rounds, inprocess: *inproc, markdown: *md, trips: *trips, server: server}
	var err error
	if c.size, err = bench.ParseSize(*size); err != nil {
		return config{}, fmt.Errorf("-size: %v", err)
	}
	if c.rounds < 1 {
		return config{}, fmt.Errorf("-rounds %d: at least 1", c.rounds)
	}
	if c.trips < 1 {
		return config{}, fmt.Errorf("-trips %d: at least 1", c.trips)
	}
	switch *tlsFlag {
	case "both":
		c.tls = []bool{false, true}
	case "on":
		c.tls = []bool{true}
	case "off":
		c.tls = []bool{false}
	default:
		return config{}, fmt.Errorf("-tls %q: off, on or both", *tlsFlag)
	}
	if c.rows, err = parseRows(*rows); err != nil {
		return config{}, fmt.Errorf("-rows: %v", err)
	}
	return c, nil
}

// parseRows reads "all", "none" or ids separated by commas, and returns
// the ids in table order.
func parseRows(s string) ([]string, error) {
	var known []string
	for _, r := range bench.UserRows {
		known = append(known, r.ID)
	}
	switch strings.TrimSpace(s) {
	case "all":
		return known, nil
	case "none":
		return nil, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		if !slices.Contains(known, id) {
			return nil, fmt.Errorf("unknown row %q (rows are %s, all or none)", id, strings.Join(known, ","))
		}
		want[id] = true
	}
	var out []string
	for _, id := range known {
		if want[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
