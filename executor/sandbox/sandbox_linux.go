package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox confines the commands of one executor on Linux: each one is
// started from a thread of its own that first enforces the policy on itself
// (no_new_privs, a Landlock domain, the network filter) and is never given
// back to the Go runtime, so that the command and everything it starts
// inherit the domain while the executor stays unconfined.
//
// The domain also follows the command's process tree: with Landlock's signal
// scope, a thread inside the domain can signal exactly the processes of the
// domain (the command's, whatever session or group they moved to, however
// they were orphaned) and nothing outside it. The thread stays parked until
// the instruction ends, and is how the executor ends the tree (Tree).
type Sandbox struct {
	policy  Policy
	confine bool              // the mode confines files and secrets
	track   bool              // Landlock scopes signals: trees are followed
	filter  []unix.SockFilter // the network filter, nil for network on
	notes   []string

	mu   sync.Mutex
	plan Plan
	rs   *ruleset
}

// The main goroutine keeps the main thread to itself, so that no goroutine
// that enters a command's domain ever runs there: the kernel judges a
// signal or a /proc read aimed at the executor's pid by its main thread.
// (Tree.own also checks, should an importer unlock it.)
func init() { runtime.LockOSThread() }

// kernel is what the running kernel offers.
type kernel struct {
	abi        int   // Landlock ABI, 0 when none
	abiErr     error // why there is none
	seccompErr error // why a seccomp filter cannot be loaded; nil when it can
}

// probeKernel asks the kernel for its Landlock ABI and, when the policy
// needs a filter (network off, or the guard that comes with following
// process trees), loads the network filter on a thread that then ends.
func probeKernel(p Policy) kernel {
	var k kernel
	k.abi, k.abiErr = landlockABI()
	if p.NetworkOff || k.abi >= MinABI {
		k.seccompErr = probeFilter()
	}
	return k
}

// probeFilter loads the network filter on a thread of its own, which the
// runtime ends with its goroutine.
func probeFilter() error {
	filter, err := networkFilter()
	if err != nil {
		return err
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- err
			return
		}
		done <- loadFilterThread(filter)
	}()
	return <-done
}

// New prepares the policy for this kernel. A confining mode, or network off,
// that the kernel cannot enforce is refused with an error that names what
// is missing and the flag that opts out: never a silent fallback.
func New(p Policy) (*Sandbox, error) {
	s, err := newSandbox(p, probeKernel(p))
	if err != nil {
		return nil, err
	}
	if s.track {
		// Orphans of a command come to the executor rather than to init,
		// so that Tree.Empty can find every live process of a tree among
		// the executor's own children.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
		}
		// The thread that starts a command is inside the command's domain,
		// so Landlock's ptrace scope does not keep the command from it:
		// through /proc/<executor>/task/<that thread> it could read the
		// executor's environment (SEMA_API_KEY), its memory (the device
		// key) and its descriptors, or trace it. A process that is not
		// dumpable can be inspected only by a caller with CAP_SYS_PTRACE,
		// which a command does not hold (unless serve runs as root in off).
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
		}
		// And it must be kept from that thread's signals (guardFilter).
		if _, err := guardFilter(0); err != nil {
			return nil, fmt.Errorf("a command's signals cannot be kept from the executor: %w; start with --sandbox off on a kernel without Landlock ABI %d", err, MinABI)
		}
	}
	if p.NetworkOff {
		if s.filter, err = networkFilter(); err != nil {
			return nil, err
		}
	}
	if s.confine || s.track {
		// Made once now, so that an error shows at start and not at the
		// first command.
		fd, err := s.enforcedFd()
		if err != nil {
			return nil, err
		}
		unix.Close(fd)
	}
	return s, nil
}

// newSandbox checks the policy against the kernel.
func newSandbox(p Policy, k kernel) (*Sandbox, error) {
	s := &Sandbox{policy: p, confine: p.Mode.Confined(), track: k.abi >= MinABI}
	if p.NetworkOff && k.seccompErr != nil {
		return nil, fmt.Errorf("--sandbox-network off needs a seccomp filter, which this kernel refused (%v); "+
			"start without --sandbox-network off to leave commands the network", k.seccompErr)
	}
	if s.confine && !s.track {
		return nil, fmt.Errorf("the %s sandbox needs Landlock ABI %d (Linux 6.12 or later, with landlock in the lsm= list); %s. "+
			"Start with --sandbox off to run commands unconfined", p.Mode, MinABI, describeKernel(k))
	}
	if s.track && k.seccompErr != nil {
		// The guard filter keeps a command's signals off the thread that
		// started it, inside its domain: without it, no tree is followed.
		if s.confine {
			return nil, fmt.Errorf("the %s sandbox keeps a command's signals off the executor with a seccomp filter, which this kernel refused (%v). "+
				"Start with --sandbox off to run commands unconfined", p.Mode, k.seccompErr)
		}
		s.track = false
		s.notes = append(s.notes, fmt.Sprintf("a process that leaves its command's process group (setsid, a daemon) can outlive its instruction: "+
			"following it needs a seccomp filter, which this kernel refused (%v)", k.seccompErr))
		return s, nil
	}
	if !s.track {
		s.notes = append(s.notes, fmt.Sprintf("a process that leaves its command's process group (setsid, a daemon) can outlive its instruction: "+
			"following it needs Landlock ABI %d, and %s", MinABI, describeKernel(k)))
	}
	return s, nil
}

func describeKernel(k kernel) string {
	switch {
	case errors.Is(k.abiErr, unix.ENOSYS):
		return "this kernel has no Landlock"
	case errors.Is(k.abiErr, unix.EOPNOTSUPP):
		return "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)"
	case k.abiErr != nil:
		return fmt.Sprintf("Landlock cannot be used here: %v", k.abiErr)
	}
	return fmt.Sprintf("this kernel offers ABI %d", k.abi)
}

// ruleset returns the current ruleset, made again when the filesystem has
// moved under the plan. s.mu must be held.
func (s *Sandbox) ruleset() (*ruleset, error) {
	if s.rs != nil && !(s.confine && s.plan.Stale()) {
		return s.rs, nil
	}
	var plan Plan
	if s.confine {
		plan = MakePlan(s.policy, time.Now())
	}
	rs, err := newRuleset(plan, s.confine)
	if err != nil {
		return nil, err
	}
	if s.rs != nil {
		s.rs.close()
	}
	s.plan, s.rs = plan, rs
	return rs, nil
}

// enforcedFd is a descriptor of the current ruleset that the caller owns:
// a rebuild that closes the ruleset's own descriptor cannot pull it away.
func (s *Sandbox) enforcedFd() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.ruleset()
	if err != nil {
		return -1, err
	}
	return unix.FcntlInt(uintptr(rs.fd), unix.F_DUPFD_CLOEXEC, 0)
}

// Launch starts name with argv and attr under the sandbox and returns the
// process and its Tree. A nil Sandbox starts it unconfined, with a nil Tree.
func (s *Sandbox) Launch(name string, argv []string, attr *os.ProcAttr) (*os.Process, *Tree, error) {
	if s == nil || !(s.confine || s.track || s.filter != nil) {
		p, err := os.StartProcess(name, argv, attr)
		return p, nil, err
	}
	var fd = -1
	if s.confine || s.track {
		var err error
		if fd, err = s.enforcedFd(); err != nil {
			return nil, nil, &EnterError{fmt.Errorf("its rules cannot be made: %w", err)}
		}
	}
	t := &Tree{reqs: make(chan func()), done: make(chan struct{}), tracked: s.track}
	started := make(chan error, 1)
	go t.own(func() error {
		if err := enforce(fd, s.filter, s.confine, s.track); err != nil {
			return &EnterError{err}
		}
		p, err := os.StartProcess(name, argv, attr)
		if err == nil {
			t.proc = p
		}
		return err
	}, started)
	if err := <-started; err != nil {
		return nil, nil, err
	}
	return t.proc, t, nil
}

// enforce confines the calling thread: no_new_privs, the ruleset (fd, which
// it closes; -1 for none), the network filter, the guard that keeps the
// command's signals off this thread when the tree is followed, and for a
// root executor in a confining mode every capability.
func enforce(fd int, filter []unix.SockFilter, confine, guard bool) error {
	if confine && unix.Geteuid() == 0 {
		if err := dropBoundingSet(); err != nil {
			return err
		}
	}
	if fd >= 0 {
		defer unix.Close(fd)
		if err := (&ruleset{fd: fd}).restrictThread(); err != nil {
			return err
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if filter != nil {
		if err := loadFilterThread(filter); err != nil {
			return err
		}
	}
	if guard {
		g, err := guardFilter(unix.Gettid())
		if err != nil {
			return err
		}
		return loadFilterThread(g)
	}
	return nil
}

// Tree is one command's process tree, held through the thread that started
// it inside its Landlock domain. Its methods are safe on a nil Tree (an
// unconfined command: nothing to follow beyond its process group).
type Tree struct {
	proc    *os.Process
	tracked bool
	reqs    chan func() // run on the domain's thread
	done    chan struct{}
	closed  sync.Once
}

// own is the domain thread's goroutine: it locks its thread and never
// unlocks it, so the runtime ends the thread with the goroutine and no other
// goroutine ever runs confined. It runs start there, then every request
// until Close.
//
// The thread is never the process's main thread: the kernel judges a
// signal or a /proc read aimed at the executor's pid by its main thread,
// which must stay outside every domain. A goroutine that finds itself
// there lets go and tries again from a new goroutine.
func (t *Tree) own(start func() error, started chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		runtime.UnlockOSThread()
		go t.own(start, started)
		return
	}
	defer close(t.done)
	err := start()
	started <- err
	if err != nil {
		return
	}
	for fn := range t.reqs {
		fn()
	}
}

// onThread runs fn on the domain's thread and waits for it.
func (t *Tree) onThread(fn func()) {
	ran := make(chan struct{})
	select {
	case t.reqs <- func() { fn(); close(ran) }:
		<-ran
	case <-t.done:
	}
}

// Signal sends each of sigs, in order, to every process of the tree:
// kill(-1) from inside the domain reaches exactly the domain's processes.
func (t *Tree) Signal(sigs ...syscall.Signal) {
	if t == nil || !t.tracked {
		return
	}
	t.onThread(func() {
		for _, sig := range sigs {
			_ = unix.Kill(-1, sig)
		}
	})
}

// Empty reports whether no live process of the tree is left, apart from
// its leader (whose waiting and reaping belong to the caller). It reaps the
// tree's zombies that came to the executor as orphans.
//
// Every live process of the tree has a topmost live ancestor inside the
// tree; with the leader gone, that ancestor's parent is gone too and it was
// given to the nearest subreaper, the executor (its main thread). So the
// tree is empty when no child of the executor's main thread but the leader
// is inside the domain.
func (t *Tree) Empty() bool {
	if t == nil || !t.tracked {
		return true
	}
	kids, err := orphans()
	if err != nil {
		return false // never claim empty what cannot be seen
	}
	kids = slices.DeleteFunc(kids, func(pid int) bool { return pid == t.proc.Pid })
	if len(kids) == 0 {
		return true // the common end: no orphan at all, no question to ask
	}
	var inside []int
	t.onThread(func() {
		for _, pid := range kids {
			if unix.Kill(pid, 0) == nil {
				inside = append(inside, pid)
			}
		}
	})
	empty := true
	for _, pid := range inside {
		if zombie(pid) {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			continue
		}
		empty = false
	}
	return empty
}

// Close lets the domain's thread end; it does not wait for it, since the
// thread has nothing left to do but end (and the runtime ends it with its
// goroutine). The tree's processes are not touched.
func (t *Tree) Close() {
	if t == nil {
		return
	}
	t.closed.Do(func() { close(t.reqs) })
}

// dropBoundingSet empties the calling thread's capability bounding set, so
// that a command it starts as root holds no capability after its exec.
// Landlock keeps a command from reading or signalling the executor, but a
// capable caller passes some of those checks (as measured: reading
// /proc/<executor>/environ), and a capable root could leave the sandbox
// outright (load a kernel module, mount over a root).
func dropBoundingSet() error {
	for c := uintptr(0); ; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
		if err == unix.EINVAL {
			return nil // past the last capability this kernel knows
		}
		if err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
}
