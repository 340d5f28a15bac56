package cli

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/executor/journal"
)

// journalFlags are serve's flags for the device's journal (docs/audit.md).
type journalFlags struct {
	on       bool
	maxSize  string
	commands string
}

func (f *journalFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.on, "journal", true, "keep this device's own hash-chained record of what it ran in the state dir (sema device log)")
	c.Flags().StringVar(&f.maxSize, "journal-max-size", "4MiB", "rotate the journal past this size (it keeps the file before too): 512KiB, 4MiB, 1GiB")
	c.Flags().StringVar(&f.commands, "journal-commands", "full", "full: record each command's text; digest: only its SHA-256 and length")
}

// open opens the journal in the state dir, or nil with --journal=false.
func (f journalFlags) open(stateDir string, log *slog.Logger) (*journal.Journal, error) {
	if f.commands != "full" && f.commands != "digest" {
		return nil, usageError{fmt.Errorf("--journal-commands %q: want full or digest", f.commands)}
	}
	max, err := parseSize(f.maxSize)
	if err != nil || max < 4096 {
		return nil, usageError{fmt.Errorf("--journal-max-size %q: want a size of at least 4KiB, such as 4MiB", f.maxSize)}
	}
	if !f.on {
		log.Warn("no journal (--journal=false): this device keeps no record of what it runs")
		return nil, nil
	}
	j, err := journal.Open(stateDir, journal.Options{MaxSize: max, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%w (serve keeps its journal in the state dir; --journal=false runs without one)", err)
	}
	return j, nil
}

func closeJournal(j *journal.Journal, log *slog.Logger) {
	if j == nil {
		return
	}
	if err := j.Close(); err != nil {
		log.Error("the journal could not be written in full", "err", err)
	}
}

// parseSize reads a byte count with an optional binary unit: 4096, 512KiB,
// 4MiB, 1GiB (K, M, G alone mean the same).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("not a size")
	}
	return n * mult, nil
}
