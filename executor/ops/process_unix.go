//go:build linux || darwin

package ops

import (
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sema-agent/sema/executor/sandbox"
)

// killWait bounds how long a process group may take to die after SIGKILL
// before the executor stops waiting and reports that it cannot tell
// (outcome_unknown). SIGKILL is not deliverable to a process stuck in an
// uninterruptible kernel wait; nothing else can stop one.
const killWait = 5 * time.Second

// shellProc is a started command: the shell, leader of its own process group
// (Setpgid, or Setsid when the sandbox confines: either way its pgid is its
// pid), and everything it started that did not
// leave the group. Under a sandbox that follows process trees (Linux), it is
// also everything the shell started that did leave the group (tree).
//
// One goroutine, started by startWaiter, owns waiting on the leader. On Linux
// it first waits without reaping (waitid WNOWAIT): until the leader is
// reaped its zombie pins the pgid, so a signal to the group cannot reach an
// unrelated group that reused the number. The owner of the shellProc lets the
// waiter reap by calling reapNow (or release, when it gives up).
type shellProc struct {
	proc *os.Process
	pgid int
	tree *sandbox.Tree // nil when only the group can be followed

	exited chan struct{} // closed once the leader has exited
	reap   chan struct{} // closed (once) to let the waiter reap the leader
	reaped chan struct{} // closed once the leader is reaped; state and err are set

	releaseOnce sync.Once
	state       *os.ProcessState
	err         error
}

func newShellProc(p *os.Process, tree *sandbox.Tree) *shellProc {
	return &shellProc{
		proc:   p,
		pgid:   p.Pid,
		tree:   tree,
		exited: make(chan struct{}),
		reap:   make(chan struct{}),
		reaped: make(chan struct{}),
	}
}

// startWaiter starts the goroutine that waits on the leader and reaps it.
// It ends once the leader has exited and release has been called.
func (c *shellProc) startWaiter() {
	go func() {
		defer close(c.reaped)
		if !waitsUnreaped {
			c.state, c.err = c.proc.Wait()
			close(c.exited)
			return
		}
		// An error here (none is expected for our own child) falls through
		// to Wait, which reports it.
		_ = waitExited(c.proc.Pid)
		close(c.exited)
		<-c.reap
		c.state, c.err = c.proc.Wait()
	}()
}

// release lets the waiter reap the leader as soon as it has exited. After
// release the pgid is no longer pinned by the leader.
func (c *shellProc) release() { c.releaseOnce.Do(func() { close(c.reap) }) }

// reapNow reaps the leader, which must have exited, and waits for it.
func (c *shellProc) reapNow() {
	c.release()
	<-c.reaped
}

// hasExited reports, without blocking, whether the leader has exited, even
// if the waiter has not yet said so.
func (c *shellProc) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return waitsUnreaped && exitedNow(c.pgid)
	}
}

// groupStop is how a process group ended.
type groupStop struct {
	dead   bool // the leader is reaped and no live member of the group remains
	killed bool // SIGTERM was not enough: the group was sent SIGKILL
}

// stop ends the whole process group, and the whole tree when it is
// followed: SIGTERM (and SIGCONT, so a stopped member runs to receive it),
// up to grace for every member to go, then SIGKILL, then up to killWait.
// It is used both to kill a running command and, after the shell has
// exited on its own, to kill what it left behind. When the leader has not
// exited even after SIGKILL, stop releases it to the waiter (which reaps it
// whenever it dies) and reports it not dead.
func (c *shellProc) stop(grace time.Duration) groupStop {
	deadline := time.Now().Add(grace)
	c.signal(syscall.SIGTERM, syscall.SIGCONT)
	if waitChanClosed(c.exited, grace) {
		c.reapNow()
		if c.waitGone(deadline) {
			return groupStop{dead: true}
		}
	}
	// The group or the tree is not empty here. The group's pgid is pinned
	// by a member; the tree's processes cannot leave its domain.
	c.signal(syscall.SIGKILL)
	deadline = time.Now().Add(killWait)
	if !waitChanClosed(c.exited, killWait) {
		c.release()
		return groupStop{killed: true}
	}
	c.reapNow()
	return groupStop{dead: c.waitGone(deadline), killed: true}
}

// signal sends each of sigs to the group and to the tree. Once the leader
// has exited, every live process of the tree outside the group is one of
// the executor's orphans (sandbox.Tree.Empty), so an empty tree is not
// signalled at all: the common end of a command costs no signal.
func (c *shellProc) signal(sigs ...syscall.Signal) {
	for _, sig := range sigs {
		signalGroup(c.pgid, sig)
	}
	if c.hasExited() && c.tree.Empty() {
		return
	}
	c.tree.Signal(sigs...)
}

// waitGone polls until neither the group nor the tree has a live member or
// the deadline passes, and reports which. Polling is the only way: there is
// no wait for processes that are not our children.
func (c *shellProc) waitGone(deadline time.Time) bool {
	delay := 500 * time.Microsecond
	for {
		if groupGone(c.pgid) && c.tree.Empty() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(delay, left))
		delay = min(2*delay, 25*time.Millisecond)
	}
}

// signalGroup sends sig to every member of the process group pgid. Errors
// are ignored: ESRCH means nobody is left, and whether anyone survives is
// established by waitGone, not by kill's answer.
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid <= 1 {
		return // never signal our own group, init's, or every process
	}
	_ = syscall.Kill(-pgid, sig)
}

// waitChanClosed waits up to d for ch to be closed and reports whether it was.
func waitChanClosed(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// groupGone reports whether the process group pgid has no live member. A
// zombie is not live: it can do nothing, and when no one reaps orphans (a
// container whose pid 1 does not) it would otherwise look alive forever.
func groupGone(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return true
	}
	return !groupHasLiveMember(pgid)
}

// execExitCode is the command's exit code: its exit status, or 128+signo when a
// signal killed it, as shells report it ($? after kill -9 is 137).
func execExitCode(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
