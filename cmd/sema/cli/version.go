package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	semaversion "github.com/sema-agent/sema/internal/version"
)

// version is the module version the binary was built from, or "dev".
func version() string { return semaversion.String() }

// versionLine is what `sema --version` and `sema version` print: the
// module version, then the commit and its date when the build knows them,
// then the toolchain.
func versionLine(info semaversion.Info) string {
	line := "sema " + info.Version
	if info.Commit != "" {
		commit := info.Commit[:min(12, len(info.Commit))]
		if info.Modified {
			commit += "+modified"
		}
		line += " (commit " + commit
		if info.Date != "" {
			line += ", " + info.Date
		}
		line += ")"
	}
	return line + " " + info.Go
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print sema's version, the commit it was built from and its date",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if asJSON {
				printAnswerJSON(semaversion.Read())
				return nil
			}
			fmt.Fprintln(Stdout, versionLine(semaversion.Read()))
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print it as one JSON object")
	return c
}
