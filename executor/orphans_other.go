//go:build !linux && !darwin

package executor

// bootID: no identity of a boot here, so nothing is recorded (record).
func bootID() (string, bool) { return "", false }

// startTime: no identity of a process here.
func startTime(int) (string, bool) { return "", false }
