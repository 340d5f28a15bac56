package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor/journal"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
)

// The device's journal, as a person reads it (docs/audit.md).

type logFlags struct {
	stateDir string
	follow   bool
	json     bool
	since    string
}

func newDeviceLogCmd() *cobra.Command {
	var f logFlags
	c := &cobra.Command{
		Use:   "log [--state-dir DIR] [-f] [--json] [--since 2h|TIME]",
		Short: "Show what this device ran, from its own journal",
		Long: "log reads the journal `sema device serve` keeps in the state dir: one line per instruction,\n" +
			"when it began, its kind, what it was (the command, the paths, never file content or output),\n" +
			"the approval decision, the outcome, the exit code and how long it took. An instruction with no\n" +
			"end yet is running, or was cut short when serve stopped. --json prints the records themselves,\n" +
			"one JSON object per line. `sema device log verify` checks the journal's hash chain.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runDeviceLog(c, f) },
	}
	c.PersistentFlags().StringVar(&f.stateDir, "state-dir", "", "where the key and the record live (default $"+device.EnvStateDir+", else the OS config dir + /sema/device)")
	c.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing instructions as they end")
	c.Flags().BoolVar(&f.json, "json", false, "print the records as JSON, one per line")
	c.Flags().StringVar(&f.since, "since", "", "only what began since then: a duration back from now (2h, 30m) or a time (RFC 3339)")
	c.AddCommand(newDeviceLogVerifyCmd(&f.stateDir))
	return c
}

func newDeviceLogVerifyCmd(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "verify [--state-dir DIR]",
		Short: "Check the journal's hash chain; name the first record that does not match",
		Long: "verify recomputes every record's digest and checks that each follows the one before it.\n" +
			"It exits 0 and prints the chain's head when the journal is whole, 1 naming the first line\n" +
			"that was edited, removed, added or moved otherwise. Keep the head it prints elsewhere to\n" +
			"notice, later, records cut off the end.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runDeviceLogVerify(*stateDir) },
	}
}

func journalDir(flag string) (string, error) {
	dir, err := device.StateDir(flag)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("no state dir at %s: %w", dir, err)
	}
	return dir, nil
}

func runDeviceLogVerify(stateDir string) error {
	dir, err := journalDir(stateDir)
	if err != nil {
		return err
	}
	lines, err := journal.Read(dir)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		fmt.Fprintf(Stdout, "the journal in %s is empty\n", dir)
		return nil
	}
	head, p := journal.Verify(lines)
	if p != nil {
		return fmt.Errorf("the journal does not verify: %s: %s", p.Line.Where(), p.Why)
	}
	fmt.Fprintf(Stdout, "ok: %s, from %s to %s; head %s\n", words.Count(len(lines), "record", "records"),
		lines[0].Time.Local().Format(time.RFC3339), lines[len(lines)-1].Time.Local().Format(time.RFC3339), head)
	return nil
}

func runDeviceLog(c *cobra.Command, f logFlags) error {
	dir, err := journalDir(f.stateDir)
	if err != nil {
		return err
	}
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return usageError{err}
	}
	v := &logView{json: f.json, since: since, begun: map[string]journal.Record{}}
	// Records are numbered across the journal's files: what was printed is
	// what is numbered up to last, whatever file a rotation moved it to.
	var last int64
	for {
		lines, err := journal.Read(dir)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if l.Err == nil && l.Seq > last {
				v.add(l.Record)
				last = l.Seq
			}
		}
		v.flushRunning(f.follow)
		if !f.follow {
			return nil
		}
		select {
		case <-c.Context().Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// parseSince reads --since: "" for everything, a duration back from now,
// or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %s: a duration back from now is positive", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration (2h, 30m) or an RFC 3339 time (2026-12-06T09:00:00Z)", s)
	}
	return t, nil
}

// logView prints the journal as one line per instruction: at its end, with
// its start's summary; a start with no end is printed as running when the
// reading stops.
type logView struct {
	json    bool
	since   time.Time
	begun   map[string]journal.Record // starts waiting for their end, by instruction id
	order   []string
	tw      *tabwriter.Writer
	printed bool
}

func (v *logView) add(r journal.Record) {
	if r.Time.Before(v.since) {
		return
	}
	if v.json {
		b, _ := json.Marshal(r)
		fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
		return
	}
	switch r.Event {
	case journal.EventStart:
		if _, ok := v.begun[r.InstructionID]; !ok {
			v.order = append(v.order, r.InstructionID)
		}
		v.begun[r.InstructionID] = r
	case journal.EventEnd:
		start, ok := v.begun[r.InstructionID]
		if ok {
			delete(v.begun, r.InstructionID)
		}
		v.row(start, r, ok)
	}
}

// flushRunning prints the starts that have no end yet, unless following
// (they may still end).
func (v *logView) flushRunning(follow bool) {
	if !follow {
		for _, id := range v.order {
			if s, ok := v.begun[id]; ok {
				v.row(s, journal.Record{}, true)
			}
		}
		v.begun, v.order = map[string]journal.Record{}, nil
	}
	if v.tw != nil {
		v.tw.Flush()
	}
}

func (v *logView) row(start, end journal.Record, began bool) {
	if v.tw == nil {
		v.tw = tabwriter.NewWriter(Stdout, 0, 0, 2, ' ', 0)
	}
	if !v.printed {
		fmt.Fprintln(v.tw, "WHEN\tINSTRUCTION\tKIND\tWHAT\tAPPROVAL\tOUTCOME\tEXIT\tTOOK")
		v.printed = true
	}
	when, took := "-", "-"
	if began {
		when = start.Time.Local().Format("2006-01-02 15:04:05")
	} else {
		when = end.Time.Local().Format("2006-01-02 15:04:05")
	}
	outcome := end.Outcome
	if end.Event == "" {
		outcome = "running, or cut short"
	} else if began {
		took = end.Time.Sub(start.Time).Round(time.Millisecond).String()
	}
	kind, what := start.Kind, start.Summary
	if kind == "" {
		kind = end.Kind
	}
	exit := "-"
	if end.ExitCode != nil {
		exit = strconv.Itoa(*end.ExitCode)
	}
	fmt.Fprintf(v.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", when, safetext.String(orDash(firstNonEmpty(start.InstructionID, end.InstructionID))),
		safetext.String(orDash(kind)), safetext.String(oneLine(orDash(what), 60)), orDash(end.Approval), safetext.String(orDash(outcome)), exit, took)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// oneLine is s on one line, cut to n runes in its middle, so that both a
// command's start and a path's file name stay.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := (n - 1) / 2
	return string(r[:head]) + "…" + string(r[len(r)-(n-1-head):])
}
