package sandbox

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

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
