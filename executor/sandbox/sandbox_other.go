//go:build !linux && !darwin

package sandbox

import (
	"fmt"
	"os"
	"runtime"
)

// Sandbox on a system with no renderer confines nothing: only mode off, with
// the network on, can be had, and New says so rather than fall back.
type Sandbox struct {
	policy Policy
	notes  []string
}

// New refuses every mode that confines, and network off, since nothing here
// can enforce them.
func New(p Policy) (*Sandbox, error) {
	if _, err := ParseMode(string(p.Mode)); err != nil {
		return nil, err
	}
	if p.Mode.Confined() {
		return nil, fmt.Errorf("the %s sandbox is not available on %s. Start with --sandbox off to run commands unconfined", p.Mode, runtime.GOOS)
	}
	if p.NetworkOff {
		return nil, fmt.Errorf("--sandbox-network off is not available on %s; start without --sandbox-network off", runtime.GOOS)
	}
	return &Sandbox{policy: p, notes: []string{
		"a process that leaves its command's process group (setsid, a daemon) can outlive its instruction: " +
			"nothing on " + runtime.GOOS + " follows a command's whole process tree",
	}}, nil
}

// Launch starts name as it is: nothing here confines it. The Tree is nil.
func (s *Sandbox) Launch(name string, argv []string, attr *os.ProcAttr) (*os.Process, *Tree, error) {
	p, err := os.StartProcess(name, argv, attr)
	return p, nil, err
}
