package cli

import (
	"os"

	"golang.org/x/term"

	"github.com/sema-agent/sema/internal/clock"
)

// What the status lines of run and fs depend on; tests replace them.
var (
	// stderrIsTerminal: progress and waiting lines go to stderr only when
	// it is a terminal.
	stderrIsTerminal = func() bool { return fileIsTerminal(Stderr) }
	// stdinIsTerminal: run uploads its stdin only when it is not one.
	stdinIsTerminal = func() bool { return fileIsTerminal(Stdin) }
	// uiClock times the status lines.
	uiClock clock.Clock = clock.Real{}
)

func fileIsTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"
