package sandbox

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden Seatbelt profiles in testdata/seatbelt")

// A Mac user's machine, as fixed strings: nothing here touches the
// filesystem.
const (
	macHome   = "/Users/dev"
	macWS     = "/Users/dev/src/app"
	macTmp    = "/private/var/folders/q1/x2y3/T/sema-cmd"
	macCache  = "/Users/dev/Library/Caches"
	macConfig = "/Users/dev/Library/Application Support"
	macState  = "/Users/dev/Library/Application Support/sema/device"
)

// macFlags are the path flags of a policy, as NewPolicy takes them.
type macFlags struct {
	allowPaths, denyRead, allowRead []string
}

// macPolicy builds the Policy NewPolicy would on that machine (every path
// there already canonical), without asking the filesystem.
func macPolicy(mode Mode, netOff bool, f macFlags) Policy {
	p := Policy{Mode: mode, NetworkOff: netOff, TempDir: macTmp}
	if mode == Off {
		return p
	}
	p.Writable = []string{macTmp}
	if mode == WorkspaceWrite {
		p.Writable = append(p.Writable, macWS)
		p.Writable = append(p.Writable, f.allowPaths...)
		p.Writable = append(p.Writable, macCache)
	}
	p.Devices = slices.Clone(writableDevices)
	deny := append(DefaultDenyRead(macHome, macConfig), f.denyRead...)
	deny = slices.DeleteFunc(deny, func(d string) bool { return slices.Contains(f.allowRead, d) })
	p.Hidden = minimal(append([]string{macState}, deny...))
	return p
}

var flagged = macFlags{
	allowPaths: []string{"/Users/dev/src/shared-lib"},
	denyRead:   []string{"/Users/dev/src/app/.env.local", "/Volumes/Work Disk/keys"},
	allowRead:  []string{"/Users/dev/.aws"},
}

func TestSeatbeltGolden(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
	}{
		{"workspace-write", macPolicy(WorkspaceWrite, false, macFlags{})},
		{"workspace-write-network-off", macPolicy(WorkspaceWrite, true, macFlags{})},
		{"read-only", macPolicy(ReadOnly, false, macFlags{})},
		{"read-only-network-off", macPolicy(ReadOnly, true, macFlags{})},
		{"off", macPolicy(Off, false, macFlags{})},
		{"off-network-off", macPolicy(Off, true, macFlags{})},
		{"workspace-write-flags", macPolicy(WorkspaceWrite, false, flagged)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SeatbeltProfile(c.p)
			file := filepath.Join("testdata", "seatbelt", c.name+".sb")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -run Seatbelt -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s (go test -run Seatbelt -update rewrites it):\n%s", file, got)
			}
			if got != "" {
				if _, err := readSBPL(got); err != nil {
					t.Errorf("profile does not parse: %v\n%s", err, got)
				}
			}
		})
	}
}

// confinedPolicies are the confining modes with the network on and off,
// with and without path flags.
func confinedPolicies() map[string]Policy {
	out := map[string]Policy{}
	for _, mode := range []Mode{WorkspaceWrite, ReadOnly} {
		for _, netOff := range []bool{false, true} {
			for name, f := range map[string]macFlags{"": {}, "+flags": flagged} {
				out[fmt.Sprintf("%s/network-off=%v%s", mode, netOff, name)] = macPolicy(mode, netOff, f)
			}
		}
	}
	return out
}

func TestSeatbeltHiddenDenied(t *testing.T) {
	for name, p := range confinedPolicies() {
		t.Run(name, func(t *testing.T) {
			prof := SeatbeltProfile(p)
			rules := mustRules(t, prof)
			if len(p.Hidden) == 0 {
				t.Fatal("the fixture hides nothing")
			}
			for _, h := range p.Hidden {
				for _, op := range []string{"file-read*", "file-write*"} {
					if !slices.ContainsFunc(rules, func(r sbplRule) bool {
						return r.action == "deny" && slices.Contains(r.ops, op) && r.direct("subpath", h)
					}) {
						t.Errorf("no (deny %s (subpath %q))", op, h)
					}
				}
				// Every allowance that reaches h also excludes it, so that
				// the result does not depend on rule order.
				for _, r := range rules {
					if r.action == "allow" && r.onFiles() && r.reaches(h) && !r.excludes(h) {
						t.Errorf("%s reaches the hidden %q without excluding it", r.text, h)
					}
				}
			}
			// Every directory above a hidden path inside a writable root
			// cannot be renamed.
			for _, h := range p.Hidden {
				for dir := path.Dir(h); dir != "/"; dir = path.Dir(dir) {
					if !slices.ContainsFunc(p.Writable, func(w string) bool { return Within(dir, w) }) {
						continue
					}
					if !slices.ContainsFunc(rules, func(r sbplRule) bool {
						return r.action == "deny" && slices.Contains(r.ops, "file-write-unlink") && r.direct("literal", dir)
					}) {
						t.Errorf("%q holds the hidden %q inside a writable root, and can be renamed", dir, h)
					}
				}
			}
		})
	}
}

func TestSeatbeltWritable(t *testing.T) {
	for name, p := range confinedPolicies() {
		t.Run(name, func(t *testing.T) {
			rules := mustRules(t, SeatbeltProfile(p))
			var writes []sbplRule
			for _, r := range rules {
				if r.action == "allow" && slices.ContainsFunc(r.ops, func(op string) bool { return strings.HasPrefix(op, "file-write") }) {
					writes = append(writes, r)
				}
			}
			for _, w := range p.Writable {
				if !slices.ContainsFunc(writes, func(r sbplRule) bool { return slices.Contains(r.ops, "file-write*") && r.reaches(w) }) {
					t.Errorf("the writable root %q is not writable", w)
				}
			}
			for _, d := range p.Devices {
				if !slices.ContainsFunc(writes, func(r sbplRule) bool { return r.reaches(d) }) {
					t.Errorf("the device %q is not writable", d)
				}
			}
			// Nothing else of the user's is writable: each write allowance
			// names only the writable roots, the devices, and the fixed
			// terminal paths under /dev.
			for _, r := range writes {
				for _, x := range r.granted() {
					ok := strings.HasPrefix(x, "/dev/") || slices.ContainsFunc(p.Writable, func(w string) bool { return Within(x, w) })
					if !ok {
						t.Errorf("%s allows writing %q", r.text, x)
					}
				}
			}
		})
	}
}

// TestSeatbeltReadOnly: the read-only profile grants nothing on the roots
// workspace-write would have made writable.
func TestSeatbeltReadOnly(t *testing.T) {
	for _, f := range []macFlags{{}, flagged} {
		for _, netOff := range []bool{false, true} {
			ww := macPolicy(WorkspaceWrite, netOff, f)
			ro := macPolicy(ReadOnly, netOff, f)
			prof := SeatbeltProfile(ro)
			rules := mustRules(t, prof)
			for _, w := range ww.Writable {
				if slices.Contains(ro.Writable, w) {
					continue
				}
				for _, r := range rules {
					for _, x := range r.paths() {
						if x == w {
							t.Errorf("the workspace-write root %q appears in the read-only profile: %s", w, r.text)
						}
					}
					for _, x := range r.granted() {
						if r.action == "allow" && Within(x, w) {
							t.Errorf("the read-only profile grants %q, beneath the workspace-write root %q: %s", x, w, r.text)
						}
					}
				}
			}
		}
	}
}

func TestSeatbeltNetwork(t *testing.T) {
	for name, p := range confinedPolicies() {
		t.Run(name, func(t *testing.T) {
			rules := mustRules(t, SeatbeltProfile(p))
			var unixBind, unixOut, ipAny bool
			for _, r := range rules {
				if r.action != "allow" {
					continue
				}
				for _, op := range r.ops {
					switch {
					case op == "network*" && len(r.filters) == 0:
						ipAny = true
					case op == "network-bind" && r.hasFilter("(local unix-socket)"):
						unixBind = true
					case op == "network-outbound" && r.hasFilter("(remote unix-socket)"):
						unixOut = true
					case strings.HasPrefix(op, "network") && strings.Contains(r.text, " ip"):
						ipAny = true
					}
				}
			}
			if ipAny == p.NetworkOff {
				t.Errorf("network off=%v, yet IP allowed=%v", p.NetworkOff, ipAny)
			}
			if p.NetworkOff && !(unixBind && unixOut) {
				t.Errorf("network off: unix sockets must stay (bind %v, connect %v)", unixBind, unixOut)
			}
		})
	}
}

func TestSeatbeltOff(t *testing.T) {
	if got := SeatbeltProfile(macPolicy(Off, false, macFlags{})); got != "" {
		t.Errorf("mode off, network on: want no profile, got\n%s", got)
	}
	rules := mustRules(t, SeatbeltProfile(macPolicy(Off, true, macFlags{})))
	var allowAll, denyIP bool
	for _, r := range rules {
		switch {
		case r.action == "allow" && slices.Equal(r.ops, []string{"default"}):
			allowAll = true
		case r.action == "deny" && slices.Equal(r.ops, []string{"network*"}) &&
			r.hasFilter(`(local ip "*:*")`) && r.hasFilter(`(remote ip "*:*")`):
			denyIP = true
		case r.action == "deny":
			t.Errorf("mode off denies more than IP: %s", r.text)
		}
	}
	if !allowAll || !denyIP {
		t.Errorf("mode off, network off: want everything allowed but IP (allow default %v, deny IP %v)", allowAll, denyIP)
	}
}

// TestSeatbeltHostilePath: a path cannot leave its string literal. Quotes,
// backslashes, parentheses and comment characters are escaped or inert;
// control characters make the whole policy unrenderable, which denies
// everything.
func TestSeatbeltHostilePath(t *testing.T) {
	base := macPolicy(WorkspaceWrite, true, macFlags{})
	for _, hostile := range []string{
		`/Users/dev/src/app/a"b`,
		`/Users/dev/src/app/a\`,
		`/Users/dev/src/app/a\"))(allow default)(deny file-read* (subpath "/x`,
		`/Users/dev/src/app/")) (allow file-read* (subpath "/x`,
		`/Users/dev/src/app/; (allow default)`,
		`/Users/dev/src/app/#"x"`,
	} {
		// The same path with every character but / made plain: the same
		// directories, so the same rules.
		benign := strings.Map(func(r rune) rune {
			if r == '/' {
				return r
			}
			return 'x'
		}, strings.TrimPrefix(hostile, "/Users/dev/src/app/"))
		benign = "/Users/dev/src/app/" + benign
		for _, set := range []string{"hidden", "writable"} {
			with := func(x string) Policy {
				p := base
				p.Hidden, p.Writable = slices.Clone(p.Hidden), slices.Clone(p.Writable)
				if set == "hidden" {
					p.Hidden = append(p.Hidden, x)
				} else {
					p.Writable = append(p.Writable, "/Volumes/x"+strings.TrimPrefix(x, "/Users/dev/src/app"))
				}
				return p
			}
			got := mustRules(t, SeatbeltProfile(with(hostile)))
			want := mustRules(t, SeatbeltProfile(with(benign)))
			if len(got) != len(want) {
				t.Fatalf("%s %q: %d rules, want %d as for a plain path", set, hostile, len(got), len(want))
			}
			for i := range got {
				if got[i].action != want[i].action || !slices.Equal(got[i].ops, want[i].ops) || len(got[i].filters) != len(want[i].filters) {
					t.Errorf("%s %q: rule %d is %s, want the shape of %s", set, hostile, i, got[i].text, want[i].text)
				}
			}
			p := with(hostile)
			x := p.Hidden[len(p.Hidden)-1]
			if set == "writable" {
				x = p.Writable[len(p.Writable)-1]
			}
			if !slices.ContainsFunc(got, func(r sbplRule) bool { return slices.Contains(r.paths(), x) }) {
				t.Errorf("%s %q does not read back as itself", set, x)
			}
		}
	}
	for _, bad := range []string{
		"/Users/dev/a\n(allow default)",
		"/Users/dev/a\x00b",
		"/Users/dev/a\rb",
		"/Users/dev/a\tb",
		"relative/path",
		"/Users/dev/../dev/.ssh",
		"",
	} {
		for _, set := range []string{"hidden", "writable", "device"} {
			p := base
			p.Hidden, p.Writable, p.Devices = slices.Clone(p.Hidden), slices.Clone(p.Writable), slices.Clone(p.Devices)
			switch set {
			case "hidden":
				p.Hidden = append(p.Hidden, bad)
			case "writable":
				p.Writable = append(p.Writable, bad)
			default:
				p.Devices = append(p.Devices, bad)
			}
			if seatbeltCheck(p) == nil {
				t.Errorf("%s %q: the policy is accepted", set, bad)
			}
			rules := mustRules(t, SeatbeltProfile(p))
			for _, r := range rules {
				if r.action == "allow" {
					t.Errorf("%s %q: the profile still allows %s", set, bad, r.text)
				}
			}
			if !slices.ContainsFunc(rules, func(r sbplRule) bool { return r.action == "deny" && slices.Equal(r.ops, []string{"default"}) }) {
				t.Errorf("%s %q: the profile does not deny by default", set, bad)
			}
		}
	}
}

func TestSeatbeltUnknownMode(t *testing.T) {
	p := macPolicy(WorkspaceWrite, false, macFlags{})
	p.Mode = "full-access"
	if seatbeltCheck(p) == nil {
		t.Error("an unknown mode is accepted")
	}
	for _, r := range mustRules(t, SeatbeltProfile(p)) {
		if r.action == "allow" {
			t.Errorf("an unknown mode allows %s", r.text)
		}
	}
}

func TestSeatbeltArgv(t *testing.T) {
	prof := SeatbeltProfile(macPolicy(ReadOnly, false, macFlags{}))
	for _, c := range []struct {
		name string
		argv []string
		cmd  []string // what sandbox-exec runs
	}{
		{"/bin/sh", []string{"sh", "-c", "echo hi"}, []string{"/bin/sh", "-c", "echo hi"}},
		{"-rf", []string{"-rf", "-x"}, []string{"./-rf", "-x"}},
		{"tool", nil, []string{"./tool"}},
	} {
		got := seatbeltArgv(prof, c.name, c.argv)
		want := append([]string{sandboxExec, "-p", prof, "--"}, c.cmd...)
		if !slices.Equal(got, want) {
			t.Errorf("seatbeltArgv(%q, %q) = %q, want %q", c.name, c.argv, got, want)
		}
	}
}

// A small reader for the SBPL this renderer writes: comments, lists, atoms,
// string literals (with \\ and \" only) and #"..." regex literals. It is
// strict, so that a profile that reads here has no stray literal or paren.

type sbplNode struct {
	atom   string     // a symbol, or a literal's value when str or regex
	str    bool       // a "..." string literal
	re     bool       // a #"..." regex literal
	list   []sbplNode // when none of the above
	isList bool
}

func (n sbplNode) String() string {
	switch {
	case n.isList:
		parts := make([]string, len(n.list))
		for i, c := range n.list {
			parts[i] = c.String()
		}
		return "(" + strings.Join(parts, " ") + ")"
	case n.str:
		return sbplString(n.atom)
	case n.re:
		return `#"` + n.atom + `"`
	}
	return n.atom
}

func readSBPL(s string) ([]sbplNode, error) {
	r := &sbplReader{s: s}
	var out []sbplNode
	for {
		r.skip()
		if r.i == len(r.s) {
			return out, nil
		}
		n, err := r.node()
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
}

type sbplReader struct {
	s string
	i int
}

func (r *sbplReader) skip() {
	for r.i < len(r.s) {
		switch c := r.s[r.i]; {
		case c == ';':
			for r.i < len(r.s) && r.s[r.i] != '\n' {
				r.i++
			}
		case c == ' ' || c == '\n' || c == '\t':
			r.i++
		default:
			return
		}
	}
}

func (r *sbplReader) node() (sbplNode, error) {
	switch {
	case r.s[r.i] == '(':
		r.i++
		n := sbplNode{isList: true}
		for {
			r.skip()
			if r.i == len(r.s) {
				return n, fmt.Errorf("unclosed list")
			}
			if r.s[r.i] == ')' {
				r.i++
				return n, nil
			}
			c, err := r.node()
			if err != nil {
				return n, err
			}
			n.list = append(n.list, c)
		}
	case r.s[r.i] == ')':
		return sbplNode{}, fmt.Errorf("stray ) at %d", r.i)
	case r.s[r.i] == '"':
		r.i++
		v, err := r.literal(true)
		return sbplNode{atom: v, str: true}, err
	case strings.HasPrefix(r.s[r.i:], `#"`):
		r.i += 2
		v, err := r.literal(false)
		return sbplNode{atom: v, re: true}, err
	}
	start := r.i
	for r.i < len(r.s) && !strings.ContainsRune(" \n\t();\"", rune(r.s[r.i])) {
		r.i++
	}
	return sbplNode{atom: r.s[start:r.i]}, nil
}

// literal reads to the closing quote; decode undoes a string's escapes.
func (r *sbplReader) literal(decode bool) (string, error) {
	var b strings.Builder
	for r.i < len(r.s) {
		c := r.s[r.i]
		r.i++
		switch {
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("control character %q in a literal", c)
		case c == '\\':
			if r.i == len(r.s) {
				return "", fmt.Errorf("unfinished escape")
			}
			e := r.s[r.i]
			r.i++
			if decode && e != '\\' && e != '"' {
				return "", fmt.Errorf("unknown escape \\%c", e)
			}
			if !decode {
				b.WriteByte('\\')
			}
			b.WriteByte(e)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unclosed literal")
}

// sbplRule is one top-level (allow|deny op... filter...) form.
type sbplRule struct {
	action  string
	ops     []string
	filters []sbplNode
	text    string
}

func mustRules(t *testing.T, profile string) []sbplRule {
	t.Helper()
	nodes, err := readSBPL(profile)
	if err != nil {
		t.Fatalf("the profile does not parse: %v\n%s", err, profile)
	}
	var out []sbplRule
	for _, n := range nodes {
		if !n.isList || len(n.list) == 0 {
			t.Fatalf("top-level %s is not a form", n)
		}
		head := n.list[0].atom
		if head == "version" {
			continue
		}
		if head != "allow" && head != "deny" {
			t.Fatalf("unexpected top-level form %s", n)
		}
		r := sbplRule{action: head, text: n.String()}
		for _, c := range n.list[1:] {
			if c.isList {
				r.filters = append(r.filters, c)
			} else {
				r.ops = append(r.ops, c.atom)
			}
		}
		out = append(out, r)
	}
	return out
}

// direct reports whether the rule has the top-level filter (kind "x").
func (r sbplRule) direct(kind, x string) bool {
	return slices.ContainsFunc(r.filters, func(f sbplNode) bool { return isPathFilter(f, kind, x) })
}

func (r sbplRule) hasFilter(s string) bool {
	return slices.ContainsFunc(r.filters, func(f sbplNode) bool { return f.String() == s })
}

func isPathFilter(f sbplNode, kind, x string) bool {
	return f.isList && len(f.list) == 2 && f.list[0].atom == kind && f.list[1].str && f.list[1].atom == x
}

// onFiles reports whether the rule is about files or running programs.
func (r sbplRule) onFiles() bool {
	return slices.ContainsFunc(r.ops, func(op string) bool {
		return strings.HasPrefix(op, "file-") || strings.HasPrefix(op, "process-exec")
	})
}

// granted are the string literals of the rule's filters outside every
// require-not: the paths the rule is about, less its exceptions.
func (r sbplRule) granted() []string {
	var out []string
	var walk func(n sbplNode)
	walk = func(n sbplNode) {
		if n.str {
			out = append(out, n.atom)
		}
		if n.isList && len(n.list) > 0 && n.list[0].atom == "require-not" {
			return
		}
		for _, c := range n.list {
			walk(c)
		}
	}
	for _, f := range r.filters {
		walk(f)
	}
	return out
}

// paths are the string literals of the rule's filters.
func (r sbplRule) paths() []string {
	var out []string
	var walk func(n sbplNode)
	walk = func(n sbplNode) {
		if n.str {
			out = append(out, n.atom)
		}
		for _, c := range n.list {
			walk(c)
		}
	}
	for _, f := range r.filters {
		walk(f)
	}
	return out
}

// reaches reports whether a filter of the rule could match x or a path
// beneath it: no filter at all, or a positive subpath or literal that
// contains x or lies beneath it.
func (r sbplRule) reaches(x string) bool {
	if len(r.filters) == 0 {
		return true
	}
	return slices.ContainsFunc(r.filters, func(f sbplNode) bool { return filterReaches(f, x) })
}

func filterReaches(f sbplNode, x string) bool {
	if !f.isList || len(f.list) == 0 {
		return false
	}
	switch f.list[0].atom {
	case "subpath":
		p := f.list[1].atom
		return Within(x, p) || Within(p, x)
	case "literal":
		return Within(f.list[1].atom, x)
	case "regex":
		// Conservatively: the regex matches x, or its fixed start lies
		// beneath x.
		re := f.list[1].atom
		if regexp.MustCompile(re).MatchString(x) {
			return true
		}
		fixed := strings.TrimPrefix(re, "^")
		fixed = fixed[:strings.IndexFunc(fixed+"[", func(r rune) bool { return strings.ContainsRune(`[](){}.*+?|\$`, r) })]
		return Within(fixed, x) || strings.HasPrefix(fixed, x+"/")
	case "require-all":
		// Every path filter must reach x; others (vnode-type, require-not)
		// narrow it further and are left to excludes.
		for _, c := range f.list[1:] {
			if c.isList && slices.Contains([]string{"subpath", "literal", "regex"}, c.list[0].atom) && !filterReaches(c, x) {
				return false
			}
		}
		return true
	}
	return false
}

// excludes reports whether every filter of the rule that reaches x cuts x
// and everything beneath it out with (require-not (subpath x)), or with one
// above x.
func (r sbplRule) excludes(x string) bool {
	if len(r.filters) == 0 {
		return false
	}
	for _, f := range r.filters {
		if !filterReaches(f, x) {
			continue
		}
		if !f.isList || f.list[0].atom != "require-all" {
			return false
		}
		if !slices.ContainsFunc(f.list[1:], func(c sbplNode) bool {
			return c.isList && c.list[0].atom == "require-not" && len(c.list) == 2 &&
				c.list[1].isList && c.list[1].list[0].atom == "subpath" && Within(x, c.list[1].list[1].atom)
		}) {
			return false
		}
	}
	return true
}
