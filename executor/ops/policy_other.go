//go:build !linux && !darwin

package ops

// regularFileID: no identities to compare on this platform.
func regularFileID(string) (fileID, bool) { return fileID{}, false }

// isOwnThread: there is no /proc here.
func isOwnThread(int) bool { return false }
