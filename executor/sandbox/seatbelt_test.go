package sandbox

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
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
