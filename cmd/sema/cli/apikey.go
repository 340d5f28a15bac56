package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
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
	var f keyCmdFlags
	c := &cobra.Command{
		Use:   "create",
		Short: "Issue another API key for yourself and print it, shown this once",
		Args:  cobra.NoArgs,
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			k, err := lc.CreateAPIKey(c.Context())
			switch {
			case err != nil:
				return err
			case f.json:
				printAnswerJSON(k)
			default:
				id := safetext.String(k.KeyID)
				printNewKey(k.APIKey, fmt.Sprintf("Created API key %s. The key is above, shown this once; revoke it with: sema apikey revoke %s", id, id))
			}
			return nil
		}),
	}
	addKeyCmdFlags(c, &f)
	return c
}

func newAPIKeyListCmd() *cobra.Command {
	return newTableCmd("list", "List your API keys that are not revoked (never the keys themselves)",
		"list shows each key's id, when it was created and when it was last used (at most a minute stale).", "KEY\tCREATED\tLAST USED",
		func(ctx context.Context, lc *client.Client) (any, [][]string, error) {
			keys, err := lc.APIKeys(ctx)
			rows := make([][]string, 0, len(keys))
			for _, k := range keys {
				rows = append(rows, []string{k.KeyID, k.CreatedAt, orDash(k.LastUsedAt)})
			}
			return api.APIKeyList{APIKeys: keys}, rows, err
		})
}

func newAPIKeyRevokeCmd() *cobra.Command {
	var f keyCmdFlags
	c := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key: it is refused from then on",
		Args:  wantArgs(1, "apikey revoke takes one key id (see sema apikey list)"),
		RunE: withKeyClient(&f, func(c *cobra.Command, lc *client.Client, args []string) error {
			k, err := lc.RevokeAPIKey(c.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(Stdout, "revoked %s\n", safetext.String(k.KeyID))
			return nil
		}),
	}
	addClientFlags(c, &f.client)
	return c
}
