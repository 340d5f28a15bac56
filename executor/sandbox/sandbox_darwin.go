//go:build darwin

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Sandbox confines the commands of one executor on macOS: each one is
// started by sandbox-exec, which enters the policy's Seatbelt profile and
// then runs the command, so that the command and everything it starts are
// confined while the executor is not.
//
// Seatbelt does not follow a process tree the way Landlock's signal scope
// does: the executor follows a command through its process group alone.
type Sandbox struct {
	policy  Policy
	profile string // "" when nothing is confined: commands start as they are
	notes   []string
}

// New prepares the policy. A confining mode, or network off, is refused
// when sandbox-exec is missing or rejects the profile, with an error that
// names what is missing and the flag that opts out: never a silent
// fallback.
func New(p Policy) (*Sandbox, error) {
	if err := seatbeltCheck(p); err != nil {
		return nil, err
	}
	s := &Sandbox{policy: p, profile: SeatbeltProfile(p)}
	if s.profile != "" {
		if err := tryProfile(s.profile); err != nil {
			return nil, fmt.Errorf("%s %w. %s", needs(p), err, optOut(p))
		}
	}
	s.notes = append(s.notes, "a process that leaves its command's process group (setsid, a daemon) can outlive its instruction: "+
		"macOS offers no way to follow a command's whole process tree")
	return s, nil
}

// tryProfile runs /usr/bin/true under profile once, so that a sandbox-exec
// that is missing, or a profile this macOS does not accept, shows at start
// and not at the first command.
func tryProfile(profile string) error {
	fi, err := os.Stat(sandboxExec)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s, which is not on this Mac", sandboxExec)
		}
		return fmt.Errorf("%s, which cannot be used here: %v", sandboxExec, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s, which is not an executable file here", sandboxExec)
	}
	argv := seatbeltArgv(profile, "/usr/bin/true", []string{"true"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s, which refuses the profile: %s", sandboxExec, msg)
	}
	return nil
}

// needs names what the policy needs of the system.
func needs(p Policy) string {
	if p.Mode.Confined() {
		return fmt.Sprintf("the %s sandbox needs", p.Mode)
	}
	return "--sandbox-network off needs"
}

// optOut names the flags that run commands without what is missing.
func optOut(p Policy) string {
	switch {
	case p.Mode.Confined() && p.NetworkOff:
		return "Start with --sandbox off, without --sandbox-network off, to run commands unconfined"
	case p.Mode.Confined():
		return "Start with --sandbox off to run commands unconfined"
	}
	return "Start without --sandbox-network off"
}

// Launch starts name with argv and attr under the sandbox. A nil Sandbox,
// or one that confines nothing, starts it as it is. The Tree is always nil:
// the command's process group is what the executor follows here.
//
// Under sandbox-exec the process started is sandbox-exec itself, which
// enters the profile and then execs the command in its place: the pid, the
// process group and the descriptors the caller sees are the command's. The
// command's argv[0] is name.
func (s *Sandbox) Launch(name string, argv []string, attr *os.ProcAttr) (*os.Process, *Tree, error) {
	if s == nil || s.profile == "" {
		p, err := os.StartProcess(name, argv, attr)
		return p, nil, err
	}
	p, err := os.StartProcess(sandboxExec, seatbeltArgv(s.profile, name, argv), attr)
	return p, nil, err
}
