package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
)

// The lane's audit trail, read, exported and verified by the admin
// (docs/audit.md).

// auditPollEvery is how often `sema audit -f` asks the lane for new rows.
const auditPollEvery = time.Second

type auditFlags struct {
	keyCmdFlags
	since  string
	event  string
	follow bool
}

func newAuditCmd() *cobra.Command {
	var f auditFlags
	c := &cobra.Command{
		Use:   "audit [--since 2h|TIME] [--event E] [--json] [-f]",
		Short: "Show the lane's audit trail (the admin's API key only)",
		Long: "audit reads the lane's audit trail, oldest first: connections, refusals, enrollments,\n" +
			"revocations, identities and keys; who, which device, from where, never a token or content.\n" +
			"Every row is hash-chained: `sema audit verify` recomputes the chain, `sema audit checkpoint`\n" +
			"prints its head to keep elsewhere, `sema audit export` writes the rows as JSON lines.",
		Args:    cobra.NoArgs,
		PreRunE: f.check,
		RunE: withKeyClient(&f.keyCmdFlags, func(c *cobra.Command, lc *client.Client, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			v := &auditView{json: f.json}
			if err := readAudit(c.Context(), lc, opts, f.follow, v.add, v.flush); err != nil {
				return err
			}
			if !v.printed && !f.json && !f.follow {
				fmt.Fprintln(Stderr, noAuditRow(f))
			}
			return nil
		}),
	}
	addKeyCmdFlags(c, &f.keyCmdFlags)
	addAuditFilterFlags(c, &f)
	c.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing rows as the lane writes them")
	c.AddCommand(newAuditExportCmd(), newAuditVerifyCmd(), newAuditCheckpointCmd())
	return c
}

// noAuditRow says that no row matched: with --event, which may be
// mistyped, it names the event and where the events are listed.
func noAuditRow(f auditFlags) string {
	if f.event != "" {
		return fmt.Sprintf("No audit row of event \"%s\"%s (docs/audit.md lists the events).", safetext.String(f.event), sinceNote(f.since))
	}
	return "No audit row" + sinceNote(f.since) + "."
}

func sinceNote(since string) string {
	if since == "" {
		return ""
	}
	return " since " + safetext.String(since)
}

func addAuditFilterFlags(c *cobra.Command, f *auditFlags) {
	c.Flags().StringVar(&f.since, "since", "", "only rows written since then: a duration back from now (2h, 30m) or a time (RFC 3339)")
	c.Flags().StringVar(&f.event, "event", "", "only rows of this event (device.connected, device.enroll_refused, …)")
}

// check refuses bad flags before any key or lane is looked for.
func (f *auditFlags) check(*cobra.Command, []string) error {
	_, err := f.options()
	return err
}

func (f auditFlags) options() (client.AuditOptions, error) {
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return client.AuditOptions{}, usageError{err}
	}
	return client.AuditOptions{Since: since, Event: f.event}, nil
}

func newAuditExportCmd() *cobra.Command {
	var f auditFlags
	c := &cobra.Command{
		Use:   "export [--since 2h|TIME] [--event E]",
		Short: "Write the audit trail as JSON lines, one row per line, for a log pipeline",
		Long: "export writes every row of the audit trail (since --since) to stdout, oldest first, one JSON\n" +
			"object per line, with stable field names (docs/api.md): seq, at, event, identityId, deviceId,\n" +
			"reason, remoteAddr, count, prev, digest. Each row's digest can be recomputed from the line\n" +
			"(docs/audit.md).",
		Args:    cobra.NoArgs,
		PreRunE: f.check,
		RunE: withKeyClient(&f.keyCmdFlags, func(c *cobra.Command, lc *client.Client, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			return readAudit(c.Context(), lc, opts, false, printAuditLine, func() {})
		}),
	}
	addClientFlags(c, &f.client)
	addAuditFilterFlags(c, &f)
	return c
}

func newAuditVerifyCmd() *cobra.Command {
	var f keyCmdFlags
	var from string
	c := &cobra.Command{
		Use:   "verify [--from CHECKPOINT]",
		Short: "Recompute the audit trail's and the instruction history's hash chains; name the first row that does not match",
		Long: "verify has the lane recompute every row's digest and check that each row follows the one\n" +
			"before, in the audit trail's chain and in the instruction history's, from the oldest row kept;\n" +
			"with --from (a checkpoint `sema audit checkpoint` printed, which the chain must still pass\n" +
			"through) only that checkpoint's chain, from there. It exits 0 printing, per chain, how many rows\n" +
			"it verified up to which head, and 1 naming the first row that was edited, removed, added or moved.",
		Args: cobra.NoArgs,
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			chains := api.Chains
			if from != "" {
				cp, err := api.ParseCheckpoint(from)
				if err != nil {
					return usageError{fmt.Errorf("--from: %w", err)}
				}
				chains = []string{cp.Chain}
			}
			for _, chain := range chains {
				v, err := lc.VerifyAudit(c.Context(), chain, from)
				if err != nil {
					return err
				}
				if f.json {
					printAnswerJSON(v)
				}
				if v.Problem != nil {
					return fmt.Errorf("the %s does not verify: row seq %d: %s", chainTitle(chain), v.Problem.Seq, safetext.String(v.Problem.Why))
				}
				if !f.json {
					fmt.Fprintf(Stdout, "verified %s of the %s up to %s\n", words.Count(int(v.Rows), "row", "rows"), chainTitle(chain), safetext.String(v.Head.String()))
				}
			}
			return nil
		}),
	}
	addKeyCmdFlags(c, &f)
	c.Flags().StringVar(&from, "from", "", "a checkpoint (chain:seq:digest) to verify its chain from")
	return c
}

// chainTitle names a chain for a person.
func chainTitle(chain string) string {
	if chain == api.ChainHistory {
		return "instruction history"
	}
	return "audit trail"
}

func newAuditCheckpointCmd() *cobra.Command {
	var f keyCmdFlags
	c := &cobra.Command{
		Use:   "checkpoint",
		Short: "Print the heads of the audit trail's and the instruction history's chains, to keep elsewhere",
		Long: "checkpoint prints the head of each hash chain (the audit trail's, then the instruction\n" +
			"history's) as chain:seq:digest, one a line. Keep them somewhere the lane's database is not:\n" +
			"`sema audit verify --from` one later proves that the rows up to it were not rewritten and that\n" +
			"none were cut off the end since.",
		Args: cobra.NoArgs,
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			for _, chain := range api.Chains {
				h, err := lc.AuditCheckpoint(c.Context(), chain)
				switch {
				case err != nil:
					return err
				case f.json:
					printAnswerJSON(h)
				default:
					fmt.Fprintln(Stdout, safetext.String(h.String()))
				}
			}
			return nil
		}),
	}
	addKeyCmdFlags(c, &f)
	return c
}

// readAudit reads the trail's pages from opts on, handing each row to add
// and calling flush after each page; following, it polls for new rows
// with the last cursor until ctx ends.
func readAudit(ctx context.Context, lc *client.Client, opts client.AuditOptions, follow bool, add func(api.AuditEntry), flush func()) error {
	for {
		page, err := lc.AuditPage(ctx, opts)
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, e := range page.Entries {
			add(e)
		}
		flush()
		if page.Next == "" {
			return errors.New("the lane's audit page has no next cursor")
		}
		opts.Cursor = page.Next
		if page.More {
			continue
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(auditPollEvery):
		}
	}
}

// printAuditLine prints a row as one JSON object on a line, escaped.
func printAuditLine(e api.AuditEntry) {
	b, _ := json.Marshal(e)
	fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
}

// auditView prints the trail as a table, or as JSON lines.
type auditView struct {
	json    bool
	tw      *tabwriter.Writer
	printed bool
}

func (v *auditView) add(e api.AuditEntry) {
	if v.json {
		printAuditLine(e)
		return
	}
	if v.tw == nil {
		v.tw = tabwriter.NewWriter(Stdout, 0, 0, 2, ' ', 0)
	}
	if !v.printed {
		fmt.Fprintln(v.tw, "WHEN\tSEQ\tEVENT\tIDENTITY\tDEVICE\tREASON\tFROM\tCOUNT")
		v.printed = true
	}
	when := e.At
	if t, err := time.Parse(time.RFC3339Nano, e.At); err == nil {
		when = t.Local().Format("2006-01-02 15:04:05")
	}
	seq := "-"
	if e.Seq > 0 {
		seq = strconv.FormatInt(e.Seq, 10)
	}
	fmt.Fprintf(v.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", safetext.String(when), seq, safetext.String(e.Event), safetext.String(orDash(e.IdentityID)),
		safetext.String(orDash(e.DeviceID)), safetext.String(orDash(e.Reason)), safetext.String(orDash(e.RemoteAddr)), e.Count)
}

func (v *auditView) flush() {
	if v.tw != nil {
		v.tw.Flush()
	}
}
