package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/executor/sandbox"
)

// sandboxFlags are serve's flags for the command sandbox
// (docs/executor.md, "Sandbox").
type sandboxFlags struct {
	mode      string
	network   string
	denyRead  []string
	allowRead []string
}

func (f *sandboxFlags) register(c *cobra.Command) {
	modes := make([]string, len(sandbox.Modes))
	for i, m := range sandbox.Modes {
		modes[i] = string(m)
	}
	c.Flags().StringVar(&f.mode, "sandbox", string(sandbox.WorkspaceWrite),
		"how commands are confined: "+strings.Join(modes, ", ")+" (docs/executor.md, Sandbox)")
	c.Flags().StringVar(&f.network, "sandbox-network", "on", "on, or off: commands can open unix and netlink sockets only (no internet)")
	c.Flags().StringArrayVar(&f.denyRead, "deny-read", nil, "a path commands can neither read nor write, beside the default credential stores (repeatable)")
	c.Flags().StringArrayVar(&f.allowRead, "allow-read", nil, "give commands back one of the default credential stores, e.g. ~/.ssh for git push (repeatable)")
}

// check reports a bad --sandbox or --sandbox-network as a usage error,
// before serve reads anything of its state.
func (f sandboxFlags) check() error {
	_, _, err := f.parse()
	return err
}

func (f sandboxFlags) parse() (mode sandbox.Mode, networkOff bool, err error) {
	if mode, err = sandbox.ParseMode(f.mode); err != nil {
		return "", false, usageError{fmt.Errorf("--sandbox: %w", err)}
	}
	switch f.network {
	case "on":
	case "off":
		networkOff = true
	default:
		return "", false, usageError{fmt.Errorf("--sandbox-network %q: want on or off", f.network)}
	}
	return mode, networkOff, nil
}

// sandboxRoots are the executor's roots and own files the policy is made of.
type sandboxRoots struct {
	workspace, tempDir, stateDir string
	allowPaths                   []string
}

// build resolves the flags into the sandbox for this kernel. A mode the
// kernel cannot enforce is an error that names what is missing.
func (f sandboxFlags) build(r sandboxRoots) (*sandbox.Sandbox, error) {
	mode, netOff, err := f.parse()
	if err != nil {
		return nil, err
	}
	opts := sandbox.Options{
		Mode: mode, NetworkOff: netOff,
		Workspace: r.workspace, TempDir: r.tempDir, AllowPaths: r.allowPaths,
		Own: []string{r.stateDir},
	}
	if opts.CacheDir, err = os.UserCacheDir(); err == nil {
		// A command may write its caches there: it must exist to be granted.
		_ = os.MkdirAll(opts.CacheDir, 0o700)
	}
	opts.Home, _ = os.UserHomeDir()
	opts.ConfigDir, _ = os.UserConfigDir()
	if opts.DenyRead, err = absPaths("--deny-read", f.denyRead); err != nil {
		return nil, err
	}
	if opts.AllowRead, err = absPaths("--allow-read", f.allowRead); err != nil {
		return nil, err
	}
	p, err := sandbox.NewPolicy(opts)
	if err != nil {
		return nil, err
	}
	return sandbox.New(p)
}

// absPaths makes each path absolute; ~/ is the home directory, since a
// quoted flag value reaches us unexpanded.
func absPaths(flag string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" {
			return nil, usageError{fmt.Errorf("%s needs a path", flag)}
		}
		if p == "~" || strings.HasPrefix(p, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, usageError{fmt.Errorf("%s %s: %v", flag, p, err)}
			}
			p = filepath.Join(home, p[1:])
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s %q: %v", flag, p, err)}
		}
		out = append(out, abs)
	}
	return out, nil
}

// logSandbox says at start, once, what confines the commands, and says it
// loudly when nothing does.
func logSandbox(log *slog.Logger, sb *sandbox.Sandbox) {
	s := sb.Policy().Summary()
	if s.Mode == sandbox.Off {
		log.Warn("commands run unconfined (--sandbox off): they can read and write whatever this user can, " +
			"the device key and credential stores included")
	} else {
		log.Info("sandbox", "mode", s.Mode, "writable", strings.Join(s.Writable, ":"),
			"hidden", strings.Join(s.Hidden, ":"), "network", s.Network)
	}
	for _, n := range sb.Notes() {
		log.Warn("sandbox: " + n)
	}
}
