package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MinABI is the Landlock ABI a confining mode needs: 6 (Linux 6.12), the
// first that scopes signals, so that a command can signal only its own
// process tree (never the executor), and that is what lets the executor end
// every process of the tree, whatever session or group it moved to.
const MinABI = 6

// landlockABI is the kernel's Landlock ABI version, 0 when Landlock is not
// built in or not enabled (errno says which).
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// The kernel's rights for each of Access's grants. REFER (ABI 2) and
// TRUNCATE (ABI 3) are always handled: MinABI has both. IOCTL_DEV is not
// handled: a device a command may open it may also control.
const (
	fsList  = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fsMake  = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER
	// fsHandled is every right the ruleset takes away unless a rule gives it
	// back; MAKE_CHAR and MAKE_BLOCK no rule gives.
	fsHandled = fsList | fsRead | fsWrite | fsMake |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	// scopeAll keeps a command's signals and abstract unix sockets inside its
	// own domain (ABI 6).
	scopeAll = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
)

// fsRights is the kernel's form of a rule's access.
func fsRights(r Rule) uint64 {
	var a uint64
	if r.Access&List != 0 && r.Dir {
		a |= fsList
	}
	if r.Access&Read != 0 {
		a |= fsRead
	}
	if r.Access&Write != 0 {
		a |= fsWrite
	}
	if r.Access&Make != 0 && r.Dir {
		a |= fsMake
	}
	return a
}

// ruleset is a Landlock ruleset, ready to be enforced on a thread.
type ruleset struct{ fd int }

// newRuleset creates a ruleset: the plan's grants when confine is set; with
// no filesystem rights handled otherwise (mode off). Its scope is always
// signals, so that the tree stays the executor's to end; abstract unix
// sockets too when confining.
func newRuleset(plan Plan, confine bool) (*ruleset, error) {
	attr := unix.LandlockRulesetAttr{Scoped: unix.LANDLOCK_SCOPE_SIGNAL}
	if confine {
		attr.Handled_access_fs = fsHandled
		attr.Scoped = scopeAll
	}
	// Only the fields of ABI 6 are passed: a larger size would be refused
	// by the kernels of ABI 6 and 7.
	size := unsafe.Offsetof(attr.Quiet_access_fs)
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return nil, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := &ruleset{fd: int(fd)}
	if confine {
		for _, r := range plan.Rules {
			if err := rs.add(r); err != nil {
				rs.close()
				return nil, err
			}
		}
	}
	return rs, nil
}

// add adds one grant. A path gone since the plan was made grants nothing.
func (rs *ruleset) add(r Rule) error {
	access := fsRights(r)
	if access == 0 {
		return nil
	}
	fd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil // replaced by a symlink since: its target decides
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsRead | fsWrite
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs.fd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", r.Path, errno)
	}
	return nil
}

func (rs *ruleset) close() { unix.Close(rs.fd) }

// restrictThread enforces the ruleset on the calling thread alone, which
// must be locked to its goroutine and never given back to the runtime.
// no_new_privs comes first: Landlock requires it of an unprivileged caller,
// and a setuid program must not shed the domain.
func (rs *ruleset) restrictThread() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs.fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
