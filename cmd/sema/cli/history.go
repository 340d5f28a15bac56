package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
)

// The lane's instruction history, as a person reads it (docs/audit.md).

type historyFlags struct {
	client clientFlags
	device string
	since  string
	json   bool
	follow bool
}

// historyPoll is how often -f asks the lane for rows settled since.
const historyPoll = time.Second

func newHistoryCmd() *cobra.Command {
	var f historyFlags
	c := &cobra.Command{
		Use:   "history [--device NAME|ID] [--since 2h|TIME] [--json] [-f] [--server URL]",
		Short: "Show what the lane ran on your devices: when, where, for whom, how it ended",
		Long: "history reads the lane's instruction history: one row per instruction the lane settled,\n" +
			"oldest first: when it arrived, the device, who asked, what it was (the command, the paths,\n" +
			"never file content or output), the outcome (ok, or the failure's errorCode), the exit code and\n" +
			"how long it took. You see your own; the admin sees everyone's. -f keeps printing rows as\n" +
			"instructions settle, on any replica. --json prints the rows themselves, one JSON object per\n" +
			"line (docs/api.md). `sema history show ID` prints one row in full.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runHistory(c, f) },
	}
	addClientFlags(c, &f.client)
	c.Flags().StringVar(&f.device, "device", "", "only this device's (its id or name)")
	c.Flags().StringVar(&f.since, "since", "", "only what arrived since then: a duration back from now (2h, 30m) or a time (RFC 3339)")
	c.Flags().BoolVar(&f.json, "json", false, "print the rows as JSON, one per line")
	c.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing instructions as they settle")
	c.AddCommand(newHistoryShowCmd())
	return c
}

func newHistoryShowCmd() *cobra.Command {
	var f historyFlags
	c := &cobra.Command{
		Use:   "show ID [--json] [--server URL]",
		Short: "Print one instruction's history row in full",
		Args:  wantArgs(1, "history show takes one instruction id (ins_…)"),
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			r, err := lc.HistoryRecord(c.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSONLine(r)
			}
			return printHistoryRecord(r)
		},
	}
	addClientFlags(c, &f.client)
	c.Flags().BoolVar(&f.json, "json", false, "print the row as JSON")
	return c
}

func runHistory(c *cobra.Command, f historyFlags) error {
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return usageError{err}
	}
	lc, err := f.client.client()
	if err != nil {
		return err
	}
	defer lc.Close()
	ctx := c.Context()
	opts := client.HistoryOptions{Since: since}
	v := &historyView{json: f.json}
	if !f.json {
		if v.names, err = historyNames(ctx, lc); err != nil {
			return err
		}
	}
	if f.device != "" {
		if opts.Device, err = historyDevice(ctx, lc, f.device); err != nil {
			return err
		}
	}
	for {
		page, err := lc.HistoryPage(ctx, opts)
		if err != nil {
			if f.follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		v.print(page.Instructions)
		opts.Cursor = page.Cursor
		if page.Next != "" {
			continue
		}
		if !f.follow {
			if !v.printed && !f.json {
				fmt.Fprintln(Stderr, "No instruction in the history yet.")
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(historyPoll):
		}
	}
}

// historyDevice is the id of --device: an id as it is (a forgotten
// device's history stays), a name among the caller's devices.
func historyDevice(ctx context.Context, lc *client.Client, want string) (string, error) {
	if strings.HasPrefix(want, "dev_") {
		return want, nil
	}
	devs, err := lc.Devices(ctx)
	if err != nil {
		return "", err
	}
	d, err := client.ChooseDevice(devs, want)
	if err != nil {
		return "", usageError{fmt.Errorf("--device %q: %w", want, err)}
	}
	return d.DeviceID, nil
}

// historyNames are the names the table shows for ids: the caller's
// devices, the caller, and, for the admin, every identity.
func historyNames(ctx context.Context, lc *client.Client) (map[string]string, error) {
	names := map[string]string{}
	me, err := lc.WhoAmI(ctx)
	if err != nil {
		return nil, err
	}
	names[me.IdentityID] = me.Name
	if me.Admin {
		idns, err := lc.Identities(ctx)
		if err != nil {
			return nil, err
		}
		for _, i := range idns {
			names[i.IdentityID] = i.Name
		}
	}
	devs, err := lc.Devices(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.DisplayName != "" {
			names[d.DeviceID] = d.DisplayName
		}
	}
	return names, nil
}

// historyView prints rows as a table, or as JSON lines.
type historyView struct {
	json    bool
	names   map[string]string
	tw      *tabwriter.Writer
	printed bool
}

func (v *historyView) print(rows []api.InstructionRecord) {
	for _, r := range rows {
		if v.json {
			printJSONLine(r)
			v.printed = true
			continue
		}
		if v.tw == nil {
			v.tw = tabwriter.NewWriter(Stdout, 0, 0, 2, ' ', 0)
		}
		if !v.printed {
			fmt.Fprintln(v.tw, "WHEN\tDEVICE\tWHO\tWHAT\tOUTCOME\tEXIT\tDURATION")
			v.printed = true
		}
		exit := "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		// Every cell comes from the lane: escaped.
		fmt.Fprintf(v.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", localTime(r.ReceivedAt), safetext.String(v.name(r.DeviceID)),
			safetext.String(v.name(orDash(r.IdentityID))), safetext.String(oneLine(r.Kind+" "+r.Summary, 60)),
			safetext.String(r.Outcome), exit, took(r.ReceivedAt, r.SettledAt))
	}
	if v.tw != nil {
		v.tw.Flush()
	}
}

func (v *historyView) name(id string) string {
	if n, ok := v.names[id]; ok {
		return n
	}
	return id
}

// localTime is a wire time in the local zone, to the second.
func localTime(wire string) string {
	t, err := time.Parse(time.RFC3339Nano, wire)
	if err != nil {
		return orDash(wire)
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// took is the time from one wire time to another.
func took(from, to string) string {
	a, err1 := time.Parse(time.RFC3339Nano, from)
	b, err2 := time.Parse(time.RFC3339Nano, to)
	if err1 != nil || err2 != nil {
		return "-"
	}
	return b.Sub(a).Round(time.Millisecond).String()
}

func printJSONLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
	return err
}

// printHistoryRecord prints every field of a row, one per line.
func printHistoryRecord(r api.InstructionRecord) error {
	exit := "-"
	if r.ExitCode != nil {
		exit = strconv.Itoa(*r.ExitCode)
	}
	tw := tabwriter.NewWriter(Stdout, 0, 0, 2, ' ', 0)
	for _, f := range [][2]string{
		{"instruction", r.InstructionID}, {"kind", r.Kind}, {"what", r.Summary}, {"outcome", r.Outcome}, {"exit", exit},
		{"device", r.DeviceID}, {"identity", orDash(r.IdentityID)}, {"api key", orDash(r.APIKeyID)},
		{"root session", orDash(r.RootSessionID)}, {"from", orDash(r.RemoteAddr)}, {"replica", orDash(r.Replica)},
		{"received", r.ReceivedAt}, {"dispatched", orDash(r.DispatchedAt)}, {"settled", r.SettledAt},
		{"took", took(r.ReceivedAt, r.SettledAt)},
		{"stdout", words.Count(r.StdoutBytes, "byte", "bytes") + truncatedMark(r.TruncatedStdout)},
		{"stderr", words.Count(r.StderrBytes, "byte", "bytes") + truncatedMark(r.TruncatedStderr)},
		{"data", words.Count(r.DataBytes, "byte", "bytes")},
		{"chain", fmt.Sprintf("%s:%d:%s (written %s, after %s)", api.ChainHistory, r.Seq, r.Digest, r.At, shortDigest(r.PrevDigest))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], safetext.String(f[1]))
	}
	return tw.Flush()
}

// shortDigest is a digest's first 12 characters, enough to tell rows apart.
func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12] + "…"
	}
	return d
}

func truncatedMark(t bool) string {
	if t {
		return " (truncated)"
	}
	return ""
}
