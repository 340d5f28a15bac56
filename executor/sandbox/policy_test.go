package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseModeIsTheClosedSet(t *testing.T) {
	for _, m := range Modes {
		if got, err := ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	for _, bad := range []string{"", "Off", "workspace", "full-access", "read_only"} {
		if _, err := ParseMode(bad); err == nil || !strings.Contains(err.Error(), "workspace-write, read-only, off") {
			t.Errorf("ParseMode(%q): %v, want an error listing the modes", bad, err)
		}
	}
}

func TestNewPolicy(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "ws")
	state := filepath.Join(home, ".config", "sema", "device")
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{ws, state, tmp, filepath.Join(home, ".ssh")} {
		os.MkdirAll(d, 0o700)
	}
	link := filepath.Join(root, "link")
	os.Symlink(ws, link)
	opts := Options{Mode: WorkspaceWrite, Workspace: link, TempDir: tmp, Own: []string{state}, Home: home,
		ConfigDir: filepath.Join(home, ".config"), CacheDir: filepath.Join(home, ".cache"),
		DenyRead: []string{filepath.Join(root, "secret")}, AllowRead: []string{filepath.Join(home, ".ssh"), state}}
	p, err := NewPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Writable, ws) || slices.Contains(p.Writable, link) {
		t.Errorf("the workspace is not canonical among the writable roots: %v", p.Writable)
	}
	if slices.Contains(p.Hidden, filepath.Join(home, ".ssh")) {
		t.Errorf("--allow-read did not give ~/.ssh back: %v", p.Hidden)
	}
	if !slices.Contains(p.Hidden, filepath.Join(home, ".config", "sema")) || !slices.Contains(p.Hidden, filepath.Join(root, "secret")) {
		t.Errorf("hidden %v: want the CLI's config dir and --deny-read", p.Hidden)
	}
	for _, h := range p.Hidden {
		if Within(state, h) && h != filepath.Join(home, ".config", "sema") {
			t.Errorf("a hidden path inside another was kept: %s", h)
		}
	}
	opts.Mode = ReadOnly
	if p, _ = NewPolicy(opts); !slices.Equal(p.Writable, []string{tmp}) {
		t.Errorf("read-only writable roots %v, want only the temp dir", p.Writable)
	}
	opts.Mode = Off
	if p, _ = NewPolicy(opts); len(p.Writable)+len(p.Hidden) != 0 {
		t.Errorf("off confines: %+v", p)
	}
	opts.Mode = WorkspaceWrite
	opts.DenyRead = []string{"relative/path"}
	if _, err := NewPolicy(opts); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative --deny-read: %v", err)
	}
}

// The state dir can never be given back by --allow-read: it is the
// executor's own.
func TestAllowReadNeverGivesBackTheStateDir(t *testing.T) {
	state := t.TempDir()
	p, err := NewPolicy(Options{Mode: WorkspaceWrite, Workspace: t.TempDir(), TempDir: t.TempDir(), Own: []string{state}, AllowRead: []string{state}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Hidden, state) {
		t.Fatalf("hidden %v, want the state dir", p.Hidden)
	}
}

func TestCanonicalResolvesThroughTheDeepestExistingAncestor(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	os.Mkdir(real, 0o700)
	os.Symlink(real, filepath.Join(root, "l"))
	got, err := Canonical(filepath.Join(root, "l", "not", "yet"))
	want, _ := filepath.EvalSymlinks(real)
	if err != nil || got != filepath.Join(want, "not", "yet") {
		t.Fatalf("Canonical = %q, %v; want %q", got, err, filepath.Join(want, "not", "yet"))
	}
}

// A command's environment never holds the executor's own variables; a
// confined one gets the one TMPDIR it may write.
func TestCommandEnvDropsTheExecutorsOwnVariables(t *testing.T) {
	environ := []string{"PATH=/bin", "SEMA_API_KEY=sk_x", "SEMA_STATE_DIR=/s", "TMPDIR=/tmp", "HOME=/h"}
	if got := CommandEnv(nil, environ); !slices.Equal(got, []string{"PATH=/bin", "TMPDIR=/tmp", "HOME=/h"}) {
		t.Errorf("unconfined: %v", got)
	}
	s := &Sandbox{policy: Policy{Mode: WorkspaceWrite, TempDir: "/t/sema-0/tmp"}}
	if got := CommandEnv(s, environ); !slices.Equal(got, []string{"PATH=/bin", "HOME=/h", "TMPDIR=/t/sema-0/tmp"}) {
		t.Errorf("confined: %v", got)
	}
}

// A hidden path inside a granted tree is cut out: the tree's other
// entries are granted one by one, the tree itself only listing, and no
// rule covers the hidden path.
func TestMakePlanCutsAroundHiddenPaths(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	for _, d := range []string{"ws", ".ssh", "docs"} {
		os.MkdirAll(filepath.Join(home, d), 0o700)
	}
	os.WriteFile(filepath.Join(home, "notes"), nil, 0o600)
	os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "sshlink"))
	p := Policy{Mode: WorkspaceWrite, Writable: []string{home}, Hidden: []string{filepath.Join(home, ".ssh")}}
	plan := MakePlan(p, time.Now().Add(time.Hour))
	rules := map[string]Access{}
	for _, r := range plan.Rules {
		if Within(r.Path, home) {
			rules[r.Path] |= r.Access
		}
	}
	want := map[string]Access{
		home:                         List,
		filepath.Join(home, "ws"):    ReadAccess | WriteAccess,
		filepath.Join(home, "docs"):  ReadAccess | WriteAccess,
		filepath.Join(home, "notes"): Read | Write,
	}
	for path, a := range want {
		if rules[path] != a {
			t.Errorf("%s: access %b, want %b", path, rules[path], a)
		}
	}
	for path := range rules {
		if _, ok := want[path]; !ok {
			t.Errorf("an unexpected rule on %s (a hidden path or a symlink)", path)
		}
	}
	if plan.Stale() {
		t.Fatal("a plan is stale with nothing changed")
	}
	os.Mkdir(filepath.Join(home, "new"), 0o700)
	if !plan.Stale() {
		t.Fatal("an entry created in a listed directory does not make the plan stale")
	}
}

// A writable root that is missing when the plan is made (a workspace
// removed, to be made again) makes the plan stale once it appears.
func TestAMissingRootMakesThePlanStaleWhenItAppears(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	plan := MakePlan(Policy{Mode: WorkspaceWrite, Writable: []string{ws}}, time.Now().Add(time.Hour))
	if plan.Stale() {
		t.Fatal("stale while the root is still missing")
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if !plan.Stale() {
		t.Fatal("the root appeared and the plan is not stale")
	}
}
