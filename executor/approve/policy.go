package approve

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// Policy says which instructions wait for a person's allow on the approval
// device. An instruction needs approval when it matches at least one Rule.
// The zero Policy needs approval for nothing; DefaultPolicy is the safe
// default. Its JSON form is documented in docs/executor.md ("Approval").
type Policy struct {
	Rules []Rule
	// TTL is how long a person has to answer, at most: it is further
	// limited to half of what remains of the instruction's timeoutMs, so
	// that an allowed instruction still has time to run. 1 s–300 s.
	TTL time.Duration
}

// Rule matches instructions. Every condition that is set must hold.
type Rule struct {
	// Kinds the rule applies to; at least one.
	Kinds []protocol.InstructionKind
	// Commands, when set, limits the rule to exec and execStream whose
	// command matches one of these patterns (see Match).
	Commands []string
	// Paths, when set, limits the rule to instructions whose path matches
	// one of these patterns.
	Paths []string
	// OutsideWorkspace limits the rule to instructions whose path is not
	// strictly below the workspace root (see Outside).
	OutsideWorkspace bool
}

// DefaultTTL is a Policy's TTL when the file sets none.
const DefaultTTL = 60 * time.Second

// The bounds of a policy's ttlSeconds: the wire allows 1 ms–300 s; a
// person needs at least a second.
const (
	MinTTL = time.Second
	MaxTTL = 300 * time.Second
)

// DefaultPolicy is what `--approve` without a policy file applies: every
// exec and execStream; every write (writeFile, writeFileExclusive,
// writeFileGuarded, appendFile, remove, createDir) whose path is outside
// the workspace root (and the executor's temporary kinds' directory, see
// Config.TempDir); and every read of content outside it (readTextFile,
// readTextLines, readBinaryFile, listDir). The governance reads (exists,
// canonicalPath, fileInfo, readLink) answer metadata the engine's own write
// gates ask for and are not gated by default.
func DefaultPolicy() *Policy {
	return &Policy{
		Rules: []Rule{
			{Kinds: []protocol.InstructionKind{protocol.KindExec, protocol.KindExecStream}},
			{Kinds: []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindWriteFileGuarded,
				protocol.KindAppendFile, protocol.KindRemove, protocol.KindCreateDir}, OutsideWorkspace: true},
			{Kinds: []protocol.InstructionKind{protocol.KindReadTextFile, protocol.KindReadTextLines, protocol.KindReadBinaryFile,
				protocol.KindListDir}, OutsideWorkspace: true},
		},
		TTL: DefaultTTL,
	}
}

// policyFile is the JSON form.
type policyFile struct {
	TTLSeconds *int       `json:"ttlSeconds"`
	Rules      []ruleFile `json:"rules"`
}

type ruleFile struct {
	Kinds            []string `json:"kinds"`
	Commands         []string `json:"commands"`
	Paths            []string `json:"paths"`
	OutsideWorkspace bool     `json:"outsideWorkspace"`
}

// LoadPolicy reads and parses a policy file.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("approval policy: %w", err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("approval policy %s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy parses the JSON form of a Policy strictly: unknown members,
// duplicate names, unknown kinds, empty patterns, a commands list on a
// kind that runs no command, a path condition on a kind without a path
// and a ttlSeconds outside 1–300 are refused. "rules" is required (an
// empty list is allowed: nothing needs approval).
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	if err := json.Unmarshal(bytes.TrimSpace(data), &f, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("not a valid policy: %w", err)
	}
	if f.Rules == nil {
		return nil, errors.New(`"rules" is required (an empty list means nothing needs approval)`)
	}
	p := &Policy{TTL: DefaultTTL}
	if f.TTLSeconds != nil {
		p.TTL = time.Duration(*f.TTLSeconds) * time.Second
		if p.TTL < MinTTL || p.TTL > MaxTTL {
			return nil, fmt.Errorf("ttlSeconds %d is outside %d-%d", *f.TTLSeconds, int(MinTTL/time.Second), int(MaxTTL/time.Second))
		}
	}
	for i, rf := range f.Rules {
		r, err := rf.rule()
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func (rf ruleFile) rule() (Rule, error) {
	if len(rf.Kinds) == 0 {
		return Rule{}, errors.New(`"kinds" must name at least one instruction kind`)
	}
	r := Rule{Commands: rf.Commands, Paths: rf.Paths, OutsideWorkspace: rf.OutsideWorkspace}
	for _, s := range rf.Kinds {
		k, err := protocol.ParseInstructionKind(s)
		if err != nil {
			return Rule{}, fmt.Errorf("kinds: %q is not an instruction kind", s)
		}
		if slices.Contains(r.Kinds, k) {
			return Rule{}, fmt.Errorf("kinds: %q is listed twice", s)
		}
		if rf.Commands != nil && !k.IsExec() {
			return Rule{}, fmt.Errorf(`"commands" applies only to exec and execStream, not %s`, k)
		}
		if (rf.Paths != nil || rf.OutsideWorkspace) && !hasPath(k) {
			return Rule{}, fmt.Errorf(`"paths" and "outsideWorkspace" apply only to kinds with a path, not %s`, k)
		}
		r.Kinds = append(r.Kinds, k)
	}
	for _, list := range [][]string{rf.Commands, rf.Paths} {
		if list != nil && len(list) == 0 {
			return Rule{}, errors.New("an empty pattern list would match nothing; leave the member out instead")
		}
		for _, pat := range list {
			if err := checkPattern(pat); err != nil {
				return Rule{}, err
			}
		}
	}
	return r, nil
}

// hasPath reports whether instructions of kind k name one path.
func hasPath(k protocol.InstructionKind) bool {
	switch k {
	case protocol.KindExec, protocol.KindExecStream, protocol.KindCreateTempDir, protocol.KindCreateTempFile, protocol.KindStatBatch:
		return false
	}
	return true
}

func command(a protocol.Args) string {
	if c, ok := a.(protocol.CommandArgs); ok {
		return c.Command
	}
	return ""
}

// Needs reports whether req must be allowed on the device before it runs.
// workspaceRoot is the enrolled root (absolute); below each of alsoInside
// ("" for none) counts as inside the workspace too, for OutsideWorkspace.
func (p *Policy) Needs(req ops.Request, workspaceRoot string, alsoInside ...string) bool {
	for _, r := range p.Rules {
		if r.matches(req, workspaceRoot, alsoInside) {
			return true
		}
	}
	return false
}

func (r Rule) matches(req ops.Request, root string, alsoInside []string) bool {
	if !slices.Contains(r.Kinds, req.Kind) {
		return false
	}
	if r.Commands != nil && !slices.ContainsFunc(r.Commands, func(pat string) bool {
		return Match(pat, NormalizeCommand(command(req.Args)))
	}) {
		return false
	}
	path := protocol.ArgsPath(req.Args)
	if r.Paths != nil && !slices.ContainsFunc(r.Paths, func(pat string) bool { return Match(pat, path) }) {
		return false
	}
	if r.OutsideWorkspace && (!outsideFor(req.Kind, root, path) ||
		slices.ContainsFunc(alsoInside, func(dir string) bool { return dir != "" && !Outside(dir, path) })) {
		return false
	}
	return true
}

// outsideFor is Outside, except that for a kind that only looks (the read
// and stat families) the workspace root itself is inside: listing the
// workspace is not a look outside it, while removing it is not a write
// inside it.
func outsideFor(kind protocol.InstructionKind, root, path string) bool {
	if kind.IsWrite() || kind == protocol.KindRemove || kind == protocol.KindCreateDir {
		return Outside(root, path)
	}
	if filepath.Clean(root) == filepath.Clean(path) {
		return false
	}
	realRoot, err1 := filepath.EvalSymlinks(root)
	realPath, err2 := filepath.EvalSymlinks(path)
	if err1 == nil && err2 == nil && realRoot == realPath {
		return false
	}
	return Outside(root, path)
}

// NormalizeCommand is the form a command is matched in: leading and
// trailing white space removed, every run of white space inside replaced
// by one space. (So "git  push" matches "git push*". Patterns are still no
// security boundary: see docs/executor.md.)
func NormalizeCommand(s string) string { return strings.Join(strings.Fields(s), " ") }

// Match reports whether pattern matches all of s: '*' matches any run of
// characters ('/' and spaces included), '?' exactly one character, '\'
// makes the next character literal; everything else matches itself.
func Match(pattern, s string) bool {
	// Iterative glob with single-star backtracking; linear in practice,
	// O(len(pattern)·len(s)) at worst.
	px, sx := 0, 0
	starP, starS := -1, -1
	for sx < len(s) {
		if px < len(pattern) {
			c, n := utf8.DecodeRuneInString(pattern[px:])
			switch c {
			case '*':
				starP, starS = px, sx
				px += n
				continue
			case '?':
				_, m := utf8.DecodeRuneInString(s[sx:])
				px, sx = px+n, sx+m
				continue
			case '\\':
				if px+n < len(pattern) {
					lit, m := utf8.DecodeRuneInString(pattern[px+n:])
					if r, k := utf8.DecodeRuneInString(s[sx:]); r == lit {
						px, sx = px+n+m, sx+k
						continue
					}
				}
			default:
				if r, k := utf8.DecodeRuneInString(s[sx:]); r == c {
					px, sx = px+n, sx+k
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star swallow one more character.
		_, k := utf8.DecodeRuneInString(s[starS:])
		starS += k
		px, sx = starP+1, starS
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

func checkPattern(p string) error {
	if p == "" {
		return errors.New("a pattern must not be empty")
	}
	if !utf8.ValidString(p) {
		return errors.New("a pattern must be valid UTF-8")
	}
	if strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return fmt.Errorf("pattern %q contains a control character", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			if i+1 == len(p) {
				return fmt.Errorf(`pattern %q ends with a lone \`, p)
			}
			i++
		}
	}
	return nil
}

// Outside reports whether path is not strictly below root: judged both on
// its spelling and on where its existing components lead (symbolic links
// resolved), so that a link inside the workspace pointing out of it counts
// as outside. The root itself counts as outside (removing it is not a
// write inside the workspace). Anything that cannot be resolved counts as
// outside.
func Outside(root, path string) bool {
	if !below(root, path) {
		return true
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return true
	}
	realPath, err := resolveExisting(path)
	if err != nil {
		return true
	}
	return !below(realRoot, realPath)
}

// below reports whether p is strictly below root, lexically (both are
// absolute and clean).
func below(root, p string) bool {
	root, p = filepath.Clean(root), filepath.Clean(p)
	if !filepath.IsAbs(root) || !filepath.IsAbs(p) || p == root {
		return false
	}
	if root == "/" {
		return true
	}
	return strings.HasPrefix(p, root+"/")
}

// resolveExisting resolves the symbolic links of the longest existing
// prefix of path and appends the rest.
func resolveExisting(path string) (string, error) {
	rest := ""
	p := filepath.Clean(path)
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
