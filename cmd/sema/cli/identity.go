package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/safetext"
)

// listFlags are the flags of a command that prints a list of the lane's.
type listFlags struct {
	client clientFlags
	json   bool
}

func addListFlags(c *cobra.Command, f *listFlags) {
	addClientFlags(c, &f.client)
	c.Flags().BoolVar(&f.json, "json", false, "print the lane's answer as JSON")
}

// printJSON prints one of the lane's answers as indented JSON, escaped.
func printJSON(v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
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
	c.AddCommand(newIdentityCreateCmd(), newIdentityListCmd())
	return c
}

func newIdentityCreateCmd() *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an identity and print its API key, shown this once",
		Long: "create makes a new identity and prints its API key on stdout, alone on its line, so that\n" +
			"KEY=$(sema identity create NAME) keeps it. The lane stores only its digest: it is never\n" +
			"shown again (the identity can issue more with `sema apikey create`).",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("identity create takes one name")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			idn, err := lc.CreateIdentity(c.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				printJSON(idn)
				return nil
			}
			fmt.Fprintln(Stdout, safetext.String(idn.APIKey))
			fmt.Fprintf(Stderr, "Created identity %s (%s). Its API key is above, shown this once; give it to its user as $%s.\n",
				safetext.String(idn.IdentityID), safetext.String(idn.Name), EnvAPIKey)
			return nil
		},
	}
	addListFlags(c, &f)
	return c
}

func newIdentityListCmd() *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "list",
		Short: "List every identity of the lane",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			all, err := lc.Identities(c.Context())
			if err != nil {
				return err
			}
			if f.json {
				printJSON(api.IdentityList{Identities: all})
				return nil
			}
			tw := tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IDENTITY\tNAME\tADMIN\tCREATED")
			for _, idn := range all {
				admin := "-"
				if idn.Admin {
					admin = "admin"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", safetext.String(idn.IdentityID), safetext.String(idn.Name), admin, safetext.String(idn.CreatedAt))
			}
			return tw.Flush()
		},
	}
	addListFlags(c, &f)
	return c
}
