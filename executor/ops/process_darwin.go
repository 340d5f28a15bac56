package ops

import (
	"errors"
	"os"
)

// waitsUnreaped: darwin's waitid also returns for a stopped child (Go issue
// 19314), so the waiter reaps the leader as soon as it exits. Signals to the
// group after that carry the (theoretical) risk that every member is gone
// and the pgid was reused before the next signal; on Linux the unreaped
// leader closes that window.
const waitsUnreaped = false

func waitExited(int) error { return errors.New("waitExited is not used on darwin") }

// exitedNow: the waiter's exited channel is the only source on darwin.
func exitedNow(int) bool { return false }

// groupHasLiveMember: without /proc, every member kill(2) can see counts as
// live. launchd reaps orphans, so a zombie does not linger there.
func groupHasLiveMember(int) bool { return true }

// outputPipe is a pipe for one of a command's output streams (darwin has
// no pipe2, and os.Pipe sets close-on-exec under the fork lock).
func outputPipe() (r, w *os.File, err error) { return os.Pipe() }
