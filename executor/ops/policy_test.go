//go:build linux || darwin

package ops

import (
	"strings"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// The policy's decisions as a table over real paths (pure: no filesystem).
func TestPolicyDecisions(t *testing.T) {
	p := &policy{
		roots: []string{"/home/u/ws", "/tmp/sema-1/tmp"},
		never: []string{"/home/u/.config/sema/device"},
		pid:   4242,
		ownProcess: func(n int) bool {
			return n == 4243 // a thread, or a process it started
		},
	}
	for _, c := range []struct {
		real        string
		own, inside bool
	}{
		{"/home/u/ws", false, true},
		{"/home/u/ws/a/b", false, true},
		{"/home/u/wsx", false, false}, // a sibling with the root as a prefix
		{"/etc/hostname", false, false},
		{"/tmp/sema-1/tmp/x", false, true},
		{"/tmp/x", false, false},
		{"/home/u/.config/sema/device", true, false},
		{"/home/u/.config/sema/device/device.key", true, false},
		{"/home/u/.config/sema/devicex", false, false},
		{"/proc/self/environ", true, false},
		{"/proc/thread-self/mem", true, false},
		{"/proc/4242", true, false},
		{"/proc/4242/mem", true, false},
		{"/proc/4243/environ", true, false}, // a thread of this process
		{"/proc/4244/environ", false, false},
		{"/proc/04242/mem", false, false}, // not how the kernel spells a pid
		{"/proc/cpuinfo", false, false},
	} {
		if got := p.own(c.real); got != c.own {
			t.Errorf("own(%s) = %v, want %v", c.real, got, c.own)
		}
		if got := p.allowed(c.real); got != c.inside {
			t.Errorf("allowed(%s) = %v, want %v", c.real, got, c.inside)
		}
		if f := p.check(c.real, c.real); (f == nil) != (c.inside && !c.own) {
			t.Errorf("check(%s) = %v", c.real, f)
		}
	}
}

// §6.6: "Outside → permission_denied whose message names the path and the
// flag that would allow it".
func TestPolicyRefusalNamesThePathAndTheFlag(t *testing.T) {
	p := &policy{roots: []string{"/home/u/ws"}}
	f := p.check("/home/u/ws/etc-link/hostname", "/etc/hostname")
	if f == nil || f.ErrorCode != protocol.ErrPermissionDenied {
		t.Fatalf("check = %v, want permission_denied", f)
	}
	for _, want := range []string{`"/home/u/ws/etc-link/hostname"`, `"/etc/hostname"`, "outside every allowed root", "sema device serve --allow-path /etc"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q does not say %q", f.Message, want)
		}
	}
	if f := p.check("/etc", "/etc"); f == nil || !strings.Contains(f.Message, "--allow-path /etc") {
		t.Errorf("a top-level directory suggests itself: %v", f)
	}
}

// The executor's own files are refused "whatever the flags", also when
// "/" is an allowed root.
func TestPolicyOwnFilesRefusedUnderTheWholeFilesystem(t *testing.T) {
	p := &policy{roots: []string{"/"}, never: []string{"/s/state"}, pid: 7}
	for _, real := range []string{"/s/state", "/s/state/device.key", "/proc/7/environ", "/proc/self/mem"} {
		f := p.check(real, real)
		if f == nil || f.ErrorCode != protocol.ErrPermissionDenied || !strings.Contains(f.Message, "never served") {
			t.Errorf("check(%s) = %v, want the own-files refusal", real, f)
		}
	}
	if f := p.check("/etc/hostname", "/etc/hostname"); f != nil {
		t.Errorf("--allow-path / refused /etc/hostname: %v", f)
	}
}

// "remove of an allowed root itself is refused", and so is removing what
// holds a root or the executor's own files.
func TestPolicyRemoveNeverTakesARootOrOwnFiles(t *testing.T) {
	p := &policy{roots: []string{"/", "/home/u/ws"}, never: []string{"/home/u/.config/sema/device"}}
	for _, real := range []string{"/", "/home/u/ws", "/home/u", "/home", "/home/u/.config", "/home/u/.config/sema"} {
		if f := p.checkRemove(real, real); f == nil || f.ErrorCode != protocol.ErrPermissionDenied {
			t.Errorf("checkRemove(%s) = %v, want permission_denied", real, f)
		}
	}
	for _, real := range []string{"/home/u/ws/a", "/home/u/other", "/tmp/x"} {
		if f := p.checkRemove(real, real); f != nil {
			t.Errorf("checkRemove(%s) = %v, want allowed", real, f)
		}
	}
}
