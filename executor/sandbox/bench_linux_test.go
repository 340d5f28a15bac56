package sandbox

import (
	"os"
	"testing"
	"time"
)

// The rules made again from scratch, as after a listed directory changed:
// the default policy of this user.
func BenchmarkPlanAndRuleset(b *testing.B) {
	home, _ := os.UserHomeDir()
	cfg, _ := os.UserConfigDir()
	p, err := NewPolicy(Options{Mode: WorkspaceWrite, Workspace: b.TempDir(), TempDir: b.TempDir(), Home: home, ConfigDir: cfg})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		plan := MakePlan(p, time.Now())
		rs, err := newRuleset(plan, true)
		if err != nil {
			b.Fatal(err)
		}
		rs.close()
	}
}

// One command started and waited for, unconfined and in each mode.
func BenchmarkLaunchTrue(b *testing.B) {
	home, _ := os.UserHomeDir()
	cfg, _ := os.UserConfigDir()
	for _, mode := range []Mode{"none", Off, WorkspaceWrite} {
		b.Run(string(mode), func(b *testing.B) {
			var s *Sandbox
			if mode != "none" {
				p, err := NewPolicy(Options{Mode: mode, Workspace: b.TempDir(), TempDir: b.TempDir(), Home: home, ConfigDir: cfg})
				if err != nil {
					b.Fatal(err)
				}
				if s, err = New(p); err != nil {
					b.Skip(err)
				}
			}
			for b.Loop() {
				p, tree, err := s.Launch("/bin/true", []string{"true"}, &os.ProcAttr{})
				if err != nil {
					b.Fatal(err)
				}
				p.Wait()
				tree.Empty()
				tree.Close()
			}
		})
	}
}
