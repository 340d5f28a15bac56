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
