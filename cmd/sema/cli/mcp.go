package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/mcp"
)

type mcpFlags struct {
	client  clientFlags
	device  string
	session string
}

func newMCPCmd() *cobra.Command {
	var f mcpFlags
	c := &cobra.Command{
		Use:   "mcp [--device ID|NAME] [--session ID]",
		Short: "Serve the device's tools to an MCP client (Claude Code, Cursor, …) on stdio",
		Long: "mcp serves the Model Context Protocol on stdin and stdout, for an agent's MCP client on\n" +
			"this machine: the tools run_command, read_file, write_file, list_directory, file_info and\n" +
			"list_devices act on a device through the lane at --server, with $" + EnvAPIKey + " (or the key\n" +
			"`sema login` saved for that lane).\n\n" +
			"The device is --device, else $" + EnvDevice + ", else your only device. The process is one root\n" +
			"session (--session, else a new ses_ id): the lane binds it to the first device it reaches\n" +
			"and refuses another. Nothing but the protocol is written to stdout; see docs/mcp.md for the\n" +
			"client configuration.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runMCP(c, f) },
	}
	addClientFlags(c, &f.client)
	c.Flags().StringVar(&f.device, "device", "", "the device the tools act on, by id or name (default $"+EnvDevice+", else your only device)")
	c.Flags().StringVar(&f.session, "session", "", "the root session id every instruction carries (default a new ses_ id)")
	return c
}

func runMCP(c *cobra.Command, f mcpFlags) error {
	lc, err := f.client.client()
	if err != nil {
		return err
	}
	defer lc.Close()
	device := f.device
	if device == "" {
		device = os.Getenv(EnvDevice)
	}
	session := f.session
	if session == "" {
		session = ids.New(ids.Session)
	}
	// stdout is the protocol's: the log goes to stderr, and never holds a
	// command, a path or content.
	log := slog.New(slog.NewTextHandler(Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := mcp.NewServer(mcp.Options{Lane: lc, Device: device, Session: session, Version: version(), Logger: log})
	if err := srv.Run(c.Context(), mcp.Stdio(Stdin, Stdout)); err != nil && c.Context().Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}
