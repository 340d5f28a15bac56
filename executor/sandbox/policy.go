package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode is how far a command is confined.
type Mode string

// The modes of --sandbox.
const (
	// WorkspaceWrite lets a command read everything but the hidden paths and
	// write only under its writable roots. The default.
	WorkspaceWrite Mode = "workspace-write"
	// ReadOnly is WorkspaceWrite with no writable root but the temporary
	// kinds' directory.
	ReadOnly Mode = "read-only"
	// Off confines nothing: a command reads, writes and connects wherever
	// the user can. Its process tree is still followed and ended with it.
	Off Mode = "off"
)

// Modes lists the modes in the order help text shows them.
var Modes = []Mode{WorkspaceWrite, ReadOnly, Off}

// ParseMode parses a --sandbox value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown sandbox mode %q (want %s)", s, joinModes())
}

func joinModes() string {
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// Confined reports whether the mode confines files and secrets.
func (m Mode) Confined() bool { return m == WorkspaceWrite || m == ReadOnly }

// Options is what the executor knows when it starts: its roots, its own
// files, and the user's flags. NewPolicy turns it into a Policy.
type Options struct {
	Mode       Mode
	NetworkOff bool // --sandbox-network off

	Workspace  string   // the enrolled workspace root
	TempDir    string   // the temporary kinds' directory; commands get it as TMPDIR
	AllowPaths []string // each --allow-path
	CacheDir   string   // the user's cache directory (os.UserCacheDir); "" for none

	// Own are the executor's own files: its state dir and lock files. A
	// command can neither read nor write them, whatever the other options
	// say; --allow-read cannot give them back.
	Own []string
	// Home is the user's home directory, where the default credential
	// stores are; "" leaves them out.
	Home string
	// ConfigDir is the sema CLI's own configuration directory.
	ConfigDir string
	DenyRead  []string // each --deny-read, added to the defaults
	AllowRead []string // each --allow-read, taken out of the defaults and --deny-read
}

// Policy is one resolved sandbox: every path absolute and canonical (the
// kernel and Seatbelt both see real paths: /tmp is /private/tmp on macOS).
// It is rendered as Landlock and seccomp rules on Linux and as a Seatbelt
// profile on macOS; both renderers read only this value.
type Policy struct {
	Mode       Mode
	NetworkOff bool
	// Writable are the roots under which a command may create, write and
	// remove: in workspace-write the workspace, the temporary kinds'
	// directory, each --allow-path and the cache directory; in read-only the
	// temporary kinds' directory alone.
	Writable []string
	// Devices are the character devices a command may write (/dev/null and
	// its kind): a shell needs them.
	Devices []string
	// Hidden can be neither read nor written: the executor's own files, the
	// credential stores and each --deny-read, less each --allow-read. A path
	// created later under one of them is hidden too.
	Hidden []string
	// TempDir is the command's TMPDIR.
	TempDir string
}

// DefaultDenyRead are the credential stores a command cannot read unless
// --allow-read gives one back: keys, tokens and cloud logins under home,
// and the sema CLI's own configuration.
func DefaultDenyRead(home, configDir string) []string {
	var out []string
	if home != "" {
		for _, p := range defaultCredentialStores {
			out = append(out, filepath.Join(home, p))
		}
	}
	if configDir != "" {
		out = append(out, filepath.Join(configDir, "sema"))
	}
	return out
}

// defaultCredentialStores are relative to the home directory.
var defaultCredentialStores = []string{
	".ssh", ".gnupg", ".aws", ".config/gcloud", ".kube", ".docker", ".netrc",
	".config/gh", ".git-credentials", ".azure", ".password-store",
	"Library/Keychains", // macOS; absent elsewhere, and then harmless
}

// writableDevices are the character devices a command may write.
var writableDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// NewPolicy resolves opts. Every path must be absolute; a path that does
// not exist yet is kept (resolved through its deepest existing ancestor) so
// that creating it later does not open a hole.
func NewPolicy(opts Options) (Policy, error) {
	if _, err := ParseMode(string(opts.Mode)); err != nil {
		return Policy{}, err
	}
	p := Policy{Mode: opts.Mode, NetworkOff: opts.NetworkOff}
	var err error
	if opts.TempDir != "" {
		if p.TempDir, err = Canonical(opts.TempDir); err != nil {
			return Policy{}, fmt.Errorf("the temporary directory: %w", err)
		}
	}
	if opts.Mode == Off {
		return p, nil
	}
	writable := []string{opts.TempDir}
	if opts.Mode == WorkspaceWrite {
		writable = append(writable, opts.Workspace)
		writable = append(writable, opts.AllowPaths...)
		writable = append(writable, opts.CacheDir)
	}
	if p.Writable, err = canonicalAll("a writable root", writable); err != nil {
		return Policy{}, err
	}
	for _, d := range writableDevices {
		if _, err := os.Stat(d); err == nil {
			p.Devices = append(p.Devices, d)
		}
	}
	deny := append(DefaultDenyRead(opts.Home, opts.ConfigDir), opts.DenyRead...)
	if deny, err = canonicalAll("--deny-read", deny); err != nil {
		return Policy{}, err
	}
	allow, err := canonicalAll("--allow-read", opts.AllowRead)
	if err != nil {
		return Policy{}, err
	}
	deny = slices.DeleteFunc(deny, func(d string) bool { return slices.Contains(allow, d) })
	own, err := canonicalAll("the executor's own files", opts.Own)
	if err != nil {
		return Policy{}, err
	}
	p.Hidden = minimal(append(own, deny...))
	return p, nil
}

// canonicalAll resolves each non-empty path, dropping duplicates.
func canonicalAll(what string, paths []string) ([]string, error) {
	var out []string
	for _, path := range paths {
		if path == "" {
			continue
		}
		c, err := Canonical(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Canonical is path with every symlink resolved. A path that does not exist
// is resolved through its deepest existing ancestor, the rest appended.
func Canonical(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%q is not an absolute path", path)
	}
	path = filepath.Clean(path)
	var rest []string
	for dir := path; ; dir = filepath.Dir(dir) {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if filepath.Dir(dir) == dir {
			return path, nil
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
	}
}

// minimal sorts paths and drops each one that lies inside another.
func minimal(paths []string) []string {
	slices.Sort(paths)
	paths = slices.Compact(paths)
	out := paths[:0]
	for _, p := range paths {
		if len(out) > 0 && Within(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Within reports whether path is root or lies under it. Both are clean and
// absolute.
func Within(path, root string) bool {
	if root == "/" || path == root {
		return true
	}
	return strings.HasPrefix(path, root+"/")
}

// Summary is the policy as a person reads it, for the start line and the
// status file.
type Summary struct {
	Mode     Mode     `json:"mode"`
	Writable []string `json:"writable,omitempty"`
	Hidden   []string `json:"hidden,omitempty"`
	Network  string   `json:"network"`
}

// Summary says what the policy confines.
func (p Policy) Summary() Summary {
	net := "on"
	if p.NetworkOff {
		net = "off"
	}
	return Summary{Mode: p.Mode, Writable: p.Writable, Hidden: p.Hidden, Network: net}
}

// OwnPrefix starts the name of every environment variable of the
// executor's own (SEMA_API_KEY, SEMA_STATE_DIR, ...): none reaches a
// command, in any mode.
const OwnPrefix = "SEMA_"

// CommandEnv is a command's base environment under s (which may be nil):
// environ less every variable of the executor's own, and, when s confines
// files, TMPDIR set to the one temporary directory a command may write.
func CommandEnv(s *Sandbox, environ []string) []string {
	out := make([]string, 0, len(environ)+1)
	tmp := ""
	if s != nil && s.policy.Mode.Confined() {
		tmp = s.policy.TempDir
	}
	for _, kv := range environ {
		if strings.HasPrefix(kv, OwnPrefix) || tmp != "" && strings.HasPrefix(kv, "TMPDIR=") {
			continue
		}
		out = append(out, kv)
	}
	if tmp != "" {
		out = append(out, "TMPDIR="+tmp)
	}
	return out
}

// EnterError is a failure to put a command in its sandbox: the command
// never started.
type EnterError struct{ Err error }

func (e *EnterError) Error() string {
	return "the command's sandbox could not be entered: " + e.Err.Error()
}

func (e *EnterError) Unwrap() error { return e.Err }
