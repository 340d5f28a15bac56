// Package cli is the sema command line: flags and wiring only. Run is
// the whole program; main calls it and exits with its code. Output goes
// through Stdout and Stderr, which tests replace.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/safetext"
	semaversion "github.com/sema-agent/sema/internal/version"
)

// Where the CLI writes; tests replace them.
var (
	Stdout io.Writer = os.Stdout
	Stderr io.Writer = os.Stderr
	Stdin  io.Reader = os.Stdin
)

// Exit codes. A supervisor can tell the terminal ends apart: revoked and
// upgrade-needed must not be restarted as they are; superseded and
// already-running mean another executor serves this device.
const (
	ExitOK         = 0
	ExitFailure    = 1 // anything else: bad state dir, key permissions, not enrolled, enrollment refused
	ExitUsage      = 2 // bad flags or arguments, an unknown command
	ExitRevoked    = 3 // the lane revoked this device; the key was deleted: enroll again
	ExitSuperseded = 4 // another connection took this device's lease (bye superseded)
	ExitUpgrade    = 5 // the lane does not speak this executor's protocol version
	ExitLocked     = 6 // another executor on this machine already serves this device
)

// ExitError carries an exit code out of a command. Quiet: Run prints
// nothing (the remote command's own non-zero exit, which says enough).
type ExitError struct {
	Code  int
	Err   error
	Quiet bool
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

type usageError struct{ error }

// Run runs the command line args and returns the process's exit code.
func Run(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(Stdout)
	root.SetErr(Stderr)
	root.SetIn(Stdin)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	var ue usageError
	if !errors.As(err, &ee) || !ee.Quiet {
		// Error texts carry the lane's and the device's messages: escaped.
		fmt.Fprintln(Stderr, "sema:", safetext.String(err.Error()+defaultLaneNote(err)+notLaneNote(err)))
	}
	var text *client.NotUTF8Error
	switch {
	case ee != nil:
		return ee.Code
	case errors.As(err, &ue), errors.As(err, &text): // text: a bad argument, nothing was sent
		return ExitUsage
	}
	return ExitFailure
}

// defaultLaneNote says, when err is a lane that could not be reached at
// DefaultServer (where a newcomer's first command goes when nothing named
// the lane), how to name the lane; "" otherwise.
func defaultLaneNote(err error) string {
	var ue *client.UnreachableError
	var de *device.UnreachableError
	switch {
	case errors.As(err, &ue) && !ue.Sent && sameServer(ue.URL, DefaultServer),
		errors.As(err, &de) && sameServer(de.URL, DefaultServer):
		return " (" + DefaultServer + " is the default lane: --server URL or $" + EnvServer + " names another, and sema login saves it)"
	}
	return ""
}

// notLaneNote says, for a 404 without the lane's error code (what answers
// a --server with a path, or a URL where no lane is), that --server is the
// lane's base URL; "" otherwise.
func notLaneNote(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound && ce.Code == "" {
		return " (no lane API there: is --server the lane's base URL, such as http://host:8420?)"
	}
	return ""
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "sema",
		Short:         "sema runs an AI agent's tools on this machine, for the device lane",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(semaversion.Read()),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newDeviceCmd(), newServerCmd(), newTokenCmd(), newDevicesCmd(), newRunCmd(), newHistoryCmd(), newFSCmd(), newQuickstartCmd(), newMCPCmd())
	root.AddCommand(newNextingCmd())
	root.AddCommand(newIdentityCmd(), newAPIKeyCmd(), newAuditCmd(), newVersionCmd())
	root.AddCommand(newLoginCmd(), newLogoutCmd(), newWhoamiCmd())
	// `sema frobnicate` is usage (2), as a bad flag is: the root checks its
	// own arguments (cobra's default check would make it exit 1), and
	// every argument check of the tree answers with a usage error.
	root.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			hint := "see sema --help"
			if names := c.SuggestionsFor(args[0]); len(names) > 0 {
				hint = "did you mean " + strings.Join(names, " or ") + "? " + hint
			}
			return usageError{fmt.Errorf("unknown command %q for %q (%s)", args[0], c.CommandPath(), hint)}
		}
		return nil
	}
	root.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
	argsAreUsage(root)
	return root
}

// argsAreUsage makes every argument check below c (cobra.NoArgs,
// ExactArgs …) fail with a usageError.
func argsAreUsage(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2 // cobra's own default, which SuggestionsFor alone does not apply
	if check := c.Args; check != nil {
		c.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			var ue usageError
			if err != nil && !errors.As(err, &ue) {
				return usageError{suggest(c, args, err)}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
}

// suggest adds to err, an argument check's refusal of a command that has
// subcommands, the subcommands args[0] may be a typo of ("sema fs lss").
func suggest(c *cobra.Command, args []string, err error) error {
	if len(args) == 0 || !c.HasAvailableSubCommands() {
		return err
	}
	if names := c.SuggestionsFor(args[0]); len(names) > 0 {
		return fmt.Errorf("%w (did you mean %s?)", err, strings.Join(names, " or "))
	}
	return err
}

func newDeviceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "device",
		Short: "Enroll this machine as a device and serve the lane from it",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("device needs a subcommand: enroll, serve, status, forget or service")}
		},
	}
	c.AddCommand(newEnrollCmd(), newServeCmd(), newStatusCmd(), newDeviceLogCmd(), newForgetCmd(), newServiceCmd())
	return c
}

// newLogger logs to Stderr as text. Nothing logged anywhere carries a
// token, a key, file content, payload or command output.
func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(Stderr, &slog.HandlerOptions{Level: level}))
}
