package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/safetext"
)

// The commands that manage identities and API keys (identity.go,
// apikey.go) share these: the client flags with --json, a run function
// that gets the lane's client, and the printing of a key shown once.

// keyCmdFlags are the flags of a command that calls the lane and may print
// its answer as JSON.
type keyCmdFlags struct {
	client clientFlags
	json   bool
}

func addKeyCmdFlags(c *cobra.Command, f *keyCmdFlags) {
	addClientFlags(c, &f.client)
	c.Flags().BoolVar(&f.json, "json", false, "print the lane's answer as JSON")
}

// withKeyClient is a RunE that calls run with the lane's client for f.
func withKeyClient(f *keyCmdFlags, run func(c *cobra.Command, lc *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		lc, err := f.client.client()
		if err != nil {
			return err
		}
		defer lc.Close()
		return run(c, lc, args)
	}
}

// wantArgs is cobra.ExactArgs(n) with a message that says what is wanted.
func wantArgs(n int, want string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{errors.New(want)}
		}
		return nil
	}
}

// printAnswerJSON prints one of the lane's answers as indented JSON, escaped.
func printAnswerJSON(v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
}

// printNewKey prints a plaintext API key alone on stdout (so that
// KEY=$(sema …) keeps it) and what it is on stderr.
func printNewKey(key, note string) {
	fmt.Fprintln(Stdout, safetext.String(key))
	fmt.Fprintln(Stderr, note)
}

func newIdentityCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "identity",
		Short: "Create and list the lane's identities (the admin's API key only)",
		Long: "identity manages who may use the lane. Only the admin identity (the one `sema server`\n" +
			"created on its first start, key in <data>/" + AdminKeyFile + ") may create and list identities.\n" +
			"Every identity sees only its own devices, instructions and sessions.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("identity needs a subcommand: create or list")}
		},
	}
	c.AddCommand(newIdentityCreateCmd(), newIdentityListCmd(), newIdentityStateCmd(true), newIdentityStateCmd(false))
	return c
}

func newIdentityCreateCmd() *cobra.Command {
	var f keyCmdFlags
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an identity and print its API key, shown this once",
		Long: "create makes a new identity and prints its API key on stdout, alone on its line, so that\n" +
			"KEY=$(sema identity create NAME) keeps it. The lane stores only its digest: it is never\n" +
			"shown again (the identity can issue more with `sema apikey create`).",
		Args: wantArgs(1, "identity create takes one name"),
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			idn, err := lc.CreateIdentity(c.Context(), args[0])
			switch {
			case err != nil:
				return err
			case f.json:
				printAnswerJSON(idn)
			default:
				printNewKey(idn.APIKey, fmt.Sprintf("Created identity %s (%s). Its API key is above, shown this once; give it to its user as $%s.",
					safetext.String(idn.IdentityID), safetext.String(idn.Name), EnvAPIKey))
			}
			return nil
		}),
	}
	addKeyCmdFlags(c, &f)
	return c
}

func newIdentityListCmd() *cobra.Command {
	return newTableCmd("list", "List every identity of the lane", "", "IDENTITY\tNAME\tADMIN\tCREATED\tSTATE",
		func(ctx context.Context, lc *client.Client) (any, [][]string, error) {
			all, err := lc.Identities(ctx)
			rows := make([][]string, 0, len(all))
			for _, idn := range all {
				admin, state := "-", "enabled"
				if idn.Admin {
					admin = "admin"
				}
				if idn.DisabledAt != "" {
					state = "disabled since " + idn.DisabledAt
				}
				rows = append(rows, []string{idn.IdentityID, idn.Name, admin, idn.CreatedAt, state})
			}
			return api.IdentityList{Identities: all}, rows, err
		})
}

// newTableCmd is a command that lists something of the lane's: fetch
// returns the answer (printed with --json) and its table rows under header
// (tab-separated), every cell escaped.
func newTableCmd(use, short, long, header string, fetch func(context.Context, *client.Client) (any, [][]string, error)) *cobra.Command {
	var f keyCmdFlags
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			answer, rows, err := fetch(c.Context(), lc)
			if err != nil {
				return err
			}
			if f.json {
				printAnswerJSON(answer)
				return nil
			}
			tw := tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, header)
			for _, row := range rows {
				for i, cell := range row {
					row[i] = safetext.String(cell)
				}
				fmt.Fprintln(tw, strings.Join(row, "\t"))
			}
			return tw.Flush()
		}),
	}
	addKeyCmdFlags(c, &f)
	return c
}

// newIdentityStateCmd is `sema identity disable` (disable) or `enable`.
func newIdentityStateCmd(disable bool) *cobra.Command {
	verb, short := "enable", "Enable a disabled identity again: its keys work again"
	if disable {
		verb, short = "disable", "Disable an identity: every key of it is refused from its next request on (its devices stay)"
	}
	var f keyCmdFlags
	c := &cobra.Command{
		Use:   verb + " NAME|ID",
		Short: short,
		Long:  short + ". The admin's right; the admin itself cannot be disabled.",
		Args:  wantArgs(1, "identity "+verb+" takes one identity's name or id"),
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			id, err := identityID(c.Context(), lc, args[0])
			if err != nil {
				return err
			}
			idn, err := lc.SetIdentityDisabled(c.Context(), id, disable)
			if err != nil {
				return err
			}
			if f.json {
				printAnswerJSON(idn)
				return nil
			}
			fmt.Fprintf(Stdout, "%sd %s (%s)\n", verb, safetext.String(idn.Name), safetext.String(idn.IdentityID))
			return nil
		}),
	}
	addKeyCmdFlags(c, &f)
	return c
}

// identityID is arg when it is an identity id, else the id of the identity
// named arg (names are unique on a lane).
func identityID(ctx context.Context, lc *client.Client, arg string) (string, error) {
	if strings.HasPrefix(arg, "idn_") {
		return arg, nil
	}
	all, err := lc.Identities(ctx)
	if err != nil {
		return "", err
	}
	for _, idn := range all {
		if idn.Name == arg {
			return idn.IdentityID, nil
		}
	}
	return "", usageError{fmt.Errorf("no identity named %q on this lane (sema identity list)", arg)}
}
