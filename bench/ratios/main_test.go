package main

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sema-agent/sema/bench"
)

func TestParseFlagsDefaults(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.tls, []bool{false, true}) {
		t.Fatalf("-tls defaults to both lanes, plain first: %v", c.tls)
	}
	if c.size != 1<<30 || c.rounds != 1 || !c.inprocess || c.markdown || c.trips != 300 || !slices.Equal(c.rows, []string{"1", "2", "2b", "2r", "3", "4", "5", "6", "6b"}) {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-size", "64M", "-rounds", "3", "-rows", "5,1", "-inprocess=false", "-markdown"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.size != 64<<20 || c.rounds != 3 || c.inprocess || !c.markdown || !slices.Equal(c.rows, []string{"1", "5"}) {
		t.Fatalf("parsed: %+v", c)
	}
	if c, err := parseFlags([]string{"-rows", "none"}, io.Discard); err != nil || len(c.rows) != 0 {
		t.Fatalf("-rows none: %+v, %v", c, err)
	}
	for flag, want := range map[string][]bool{"on": {true}, "off": {false}, "both": {false, true}} {
		if c, err := parseFlags([]string{"-tls", flag}, io.Discard); err != nil || !slices.Equal(c.tls, want) {
			t.Errorf("-tls %s: %v, %v", flag, c.tls, err)
		}
	}
	if c, err := parseFlags([]string{"-server-flag=--a=1", "-server-flag", "--b"}, io.Discard); err != nil || !slices.Equal(c.server, []string{"--a=1", "--b"}) {
		t.Errorf("-server-flag: %v, %v", c.server, err)
	}
	for _, bad := range [][]string{{"-tls", "yes"}, {"-size", "0"}, {"-size", "1.5G"}, {"-size", "12X"}, {"-rounds", "0"}, {"-rows", "1,9"}, {"-rows", ""}, {"-trips", "0"}, {"extra"}, {"-nope"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1G": 1 << 30, "1GiB": 1 << 30, "256M": 256 << 20, "64MB": 64 << 20, "4096": 4096, "10B": 10, "3k": 3 << 10, "1T": 1 << 40} {
		if got, err := bench.ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1M", "0", "1.5G", "1P", "2T", "1 G", "M1", "99999999999999999999"} {
		if n, err := bench.ParseSize(bad); err == nil {
			t.Errorf("%q: accepted as %d", bad, n)
		}
	}
	if s := bench.FormatSize(1 << 30); s != "1 GiB" {
		t.Errorf("FormatSize(1G) = %q", s)
	}
	if s := bench.FormatSize(1000); s != "1000 B" {
		t.Errorf("FormatSize(1000) = %q", s)
	}
}

func TestCPUPerGiB(t *testing.T) {
	c := bench.CPU{{Name: "server", Time: 2 * time.Second}, {Name: "cli", Time: time.Second}}
	if got, want := c.PerGiB(512<<20), "server 4.00, cli 2.00 (sum 6.00)"; got != want {
		t.Fatalf("PerGiB = %q, want %q", got, want)
	}
	if got := c.PerGiB(0); got != "" {
		t.Fatalf("PerGiB(0) = %q", got)
	}
}
