package sandbox

// Notes are what the executor should say once at start about what this
// system cannot do in the chosen mode.
func (s *Sandbox) Notes() []string {
	if s == nil {
		return nil
	}
	return s.notes
}

// Policy is the policy the sandbox enforces.
func (s *Sandbox) Policy() Policy { return s.policy }

// NewSession reports whether a command starts in a session of its own, with
// no controlling terminal: in every mode that confines. A command that kept
// the terminal serve runs in could read what the user types there, and push
// input into it (TIOCSTI) that the user's shell would run, unconfined. Its
// process group is its own either way.
func (s *Sandbox) NewSession() bool { return s != nil && s.policy.Mode.Confined() }
