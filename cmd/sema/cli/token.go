package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/internal/safetext"
)

type tokenFlags struct {
	client    clientFlags
	workspace string
	json      bool
}

func newTokenCmd() *cobra.Command {
	var f tokenFlags
	c := &cobra.Command{
		Use:   "token [--server URL] [--workspace DIR]",
		Short: "Issue a one-shot enrollment token and print the line that enrolls a device with it",
		Long: "token asks the lane for an enrollment token (valid 15 minutes by default, usable once) and\n" +
			"prints the exact `sema device enroll` line to run on the device. The token authorizes that one\n" +
			"enrollment and nothing else, so the device needs no API key. --server is also the URL the\n" +
			"device will dial, so give the one the device can reach.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runToken(c, f) },
	}
	addClientFlags(c, &f.client)
	c.Flags().StringVar(&f.workspace, "workspace", "~", "the device-side workspace root to put in the enroll line")
	c.Flags().BoolVar(&f.json, "json", false, "print the lane's answer as JSON instead")
	return c
}

func runToken(c *cobra.Command, f tokenFlags) error {
	if f.workspace == "" {
		// enroll refuses an empty --workspace: a token for that line is wasted.
		return usageError{errors.New("--workspace is empty: name the device-side directory the lane resolves relative paths against (default ~)")}
	}
	lc, err := f.client.client()
	if err != nil {
		return err
	}
	defer lc.Close()
	tok, err := lc.EnrollToken(c.Context())
	if err != nil {
		return err
	}
	if f.json {
		b, _ := json.Marshal(tok)
		fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
		return nil
	}
	fmt.Fprintln(Stdout, safetext.String(enrollLine(lc.BaseURL(), tok.Token, f.workspace)))
	// The token is the enrollment's credential (docs/api.md, "Enrollment"):
	// the device needs no API key.
	fmt.Fprintf(Stderr, "Run that line on the device within %v (until %s); the token works once and is\n"+
		"all the device needs, no API key. Then start the executor there: sema device serve\n",
		time.Duration(tok.TTLSec)*time.Second, safetext.String(tok.ExpiresAt))
	return nil
}

// enrollLine is the command that enrolls a device. "~" is left for the
// device's shell to expand.
func enrollLine(server, token, workspace string) string {
	ws := shellQuote(workspace)
	switch {
	case workspace == "~":
		ws = "~"
	case strings.HasPrefix(workspace, "~/"):
		ws = "~/" + shellQuote(workspace[2:])
	}
	return fmt.Sprintf("sema device enroll --server %s --token %s --workspace %s", shellQuote(server), shellQuote(token), ws)
}
