package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/safetext"
)

func newAPIKeyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "apikey",
		Short: "Create, list and revoke your API keys",
		Long: "apikey manages the API keys of the identity whose key you use. A new key is shown once;\n" +
			"the lane keeps only its digest. A revoked key is refused at once. The admin may revoke any\n" +
			"identity's key, but never its own last one.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("apikey needs a subcommand: create, list or revoke")}
		},
	}
	c.AddCommand(newAPIKeyCreateCmd(), newAPIKeyListCmd(), newAPIKeyRevokeCmd())
	return c
}

func newAPIKeyCreateCmd() *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "create",
		Short: "Issue another API key for yourself and print it, shown this once",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			k, err := lc.CreateAPIKey(c.Context())
			if err != nil {
				return err
			}
			if f.json {
				printJSON(k)
				return nil
			}
			fmt.Fprintln(Stdout, safetext.String(k.APIKey))
			fmt.Fprintf(Stderr, "Created API key %s. The key is above, shown this once; revoke it with: sema apikey revoke %s\n",
				safetext.String(k.KeyID), safetext.String(k.KeyID))
			return nil
		},
	}
	addListFlags(c, &f)
	return c
}

func newAPIKeyListCmd() *cobra.Command {
	var f listFlags
	c := &cobra.Command{
		Use:   "list",
		Short: "List your API keys that are not revoked (never the keys themselves)",
		Long:  "list shows each key's id, when it was created and when it was last used (at most a minute stale).",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			keys, err := lc.APIKeys(c.Context())
			if err != nil {
				return err
			}
			if f.json {
				printJSON(api.APIKeyList{APIKeys: keys})
				return nil
			}
			tw := tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tCREATED\tLAST USED")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", safetext.String(k.KeyID), safetext.String(k.CreatedAt), safetext.String(orDash(k.LastUsedAt)))
			}
			return tw.Flush()
		},
	}
	addListFlags(c, &f)
	return c
}

func newAPIKeyRevokeCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key: it is refused from then on",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("apikey revoke takes one key id (see sema apikey list)")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			k, err := lc.RevokeAPIKey(c.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(Stdout, "revoked %s\n", safetext.String(k.KeyID))
			return nil
		},
	}
	addClientFlags(c, &f)
	return c
}
