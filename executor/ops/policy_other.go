//go:build !linux && !darwin

package ops

// ownIDs: no identities to compare on this platform.
type ownIDs struct{}

func newOwnIDs([]string) *ownIDs { return nil }

func (*ownIDs) owner(fileID) string { return "" }

// isOwnProcess: there is no /proc here.
func isOwnProcess(int) bool { return false }
