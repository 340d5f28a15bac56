package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/device"
)

// EnvAPIKey carries the user's credential for enrollment.
const EnvAPIKey = "SEMA_API_KEY"

type enrollFlags struct {
	server, token, workspace, name, stateDir string
	retryUnreachable                         time.Duration
}

func newEnrollCmd() *cobra.Command {
	var f enrollFlags
	c := &cobra.Command{
		Use:   "enroll --token TOKEN --workspace DIR [--server URL] [--name NAME] [--state-dir DIR]",
		Short: "Register this machine with the lane, with the one-shot token `sema token` printed",
		Long: "enroll generates this device's Ed25519 key here (only the public key leaves the machine),\n" +
			"registers it with the lane using the one-shot enrollment token `sema token` printed (the token\n" +
			"is the credential for this one call: the machine needs no API key; $" + EnvAPIKey + ", when set,\n" +
			"is sent instead), and stores the device id beside the key. It prints the device id.\n" +
			"--token - reads the token from standard input, keeping it out of the process list.\n" +
			"A lane that cannot be reached (connection refused, DNS, TLS, no answer) is retried with\n" +
			"backoff for --retry-unreachable (at most 60s), then enroll fails: cannot reach the lane at URL.\n" +
			"A failed enrollment leaves no state dir behind, except a key the lane may have registered\n" +
			"before its answer was lost: run the same command again to finish.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runEnroll(c, f) },
	}
	addServerFlag(c, &f.server)
	c.Flags().StringVar(&f.token, "token", "", "the one-shot enrollment token sema token printed (set_…), or - to read it from standard input")
	c.Flags().StringVar(&f.workspace, "workspace", "", "the directory the lane resolves relative paths against")
	c.Flags().StringVar(&f.name, "name", "", "the device's name, which --device takes as well as its id (default this machine's host name)")
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "where the key and the record live (default $"+device.EnvStateDir+", else the OS config dir + /sema/device)")
	c.Flags().DurationVar(&f.retryUnreachable, "retry-unreachable", device.MaxUnreachableRetry, "how long to retry a lane that cannot be reached (at most "+device.MaxUnreachableRetry.String()+")")
	return c
}

func runEnroll(c *cobra.Command, f enrollFlags) error {
	if f.token == "" || f.workspace == "" {
		return usageError{errors.New("enroll needs --token and --workspace")}
	}
	if f.retryUnreachable < time.Second || f.retryUnreachable > device.MaxUnreachableRetry {
		return usageError{fmt.Errorf("--retry-unreachable must be between 1s and %s (got %s)", device.MaxUnreachableRetry, f.retryUnreachable)}
	}
	token := f.token
	if token == "-" {
		line, err := bufio.NewReader(Stdin).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("reading the token from standard input: %w", err)
		}
		token = strings.TrimSpace(line)
	}
	if !strings.HasPrefix(token, api.EnrollTokenPrefix) {
		// Sent as the bearer, it would be refused as an invalid API key.
		// It is not repeated: it may be a key pasted by mistake.
		return usageError{fmt.Errorf("--token: an enrollment token starts with %s, and this one does not: give the whole token `sema token` printed", api.EnrollTokenPrefix)}
	}
	name := f.name
	if name == "" {
		// As a person would name it: the machine's own name.
		name, _ = os.Hostname()
	}
	dir, err := device.StateDir(f.stateDir)
	if err != nil {
		return err
	}
	server, key, _, err := credentials(f.server, "")
	if err != nil {
		return err
	}
	rec, err := device.Enroll(c.Context(), device.EnrollOptions{
		Server: server, Token: token, APIKey: key,
		WorkspaceRoot: f.workspace, DisplayName: name, StateDir: dir,
		UnreachableRetry: f.retryUnreachable, Logger: newLogger(false),
	})
	if err != nil && errors.Is(err, context.Canceled) && c.Context().Err() != nil {
		// Ctrl-C; the error says whether the key stays for a replay.
		return &ExitError{Code: ExitCancelled, Err: err}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(Stdout, rec.DeviceID)
	serve := "sema device serve"
	if f.stateDir != "" || os.Getenv(device.EnvStateDir) != "" {
		// Said when it is not the default, which serve finds by itself.
		serve += " --state-dir " + shellQuote(dir)
	}
	fmt.Fprintf(Stderr, "Enrolled as %s (state dir %s). Start serving with: %s\n", rec.DeviceID, dir, serve)
	return nil
}
