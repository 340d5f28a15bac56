package sandbox

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The guard filter keeps a command's signals off the thread that started
// it. That thread is inside the command's Landlock domain (it has to be, to
// signal the whole tree), so Landlock's signal scope lets the command
// signal it; and a signal aimed at a thread's id reaches the executor
// itself (kill(2) takes it as the whole process; SIGKILL and SIGSTOP end or
// stop every thread). The filter refuses, with EPERM as the kernel refuses
// a signal, every call that names the thread: kill, tkill and
// rt_sigqueueinfo by their first argument, tgkill and rt_tgsigqueueinfo by
// their second, pidfd_open (whose descriptor pidfd_send_signal would use);
// and fcntl(F_SETSIG), which would let an I/O owner set with F_SETOWN_EX to
// the thread deliver any signal instead of SIGIO (which the executor
// ignores). A call of another architecture's ABI is refused when either of
// its first two arguments is the thread, and its fcntl when it sets a
// signal, so that a 32-bit program cannot go around it.
//
// The executor's pid is safe without it: Landlock judges a signal to a pid
// by the process's main thread, which is in no domain.

// seccomp_data's second argument (the low half on little-endian machines).
const offArg1 = 24

// fcntl and fcntl64 on i386 and 32-bit arm, the foreign ABIs a 64-bit
// kernel runs.
const compatFcntl, compatFcntl64 = 55, 221

// guardFilter assembles the guard for the thread tid.
func guardFilter(tid int) ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const x32Bit = 0x40000000
	t := uint32(tid)
	deny := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	prog := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: offArch, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipFalse: 15}, // -> 17, another ABI
		/* 2 */ bpf.LoadAbsolute{Off: offNr, Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipTrue: 13}, // -> 17, x32
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_KILL, SkipTrue: 6}, // -> 11
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_TKILL, SkipTrue: 5},
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_RT_SIGQUEUEINFO, SkipTrue: 4},
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PIDFD_OPEN, SkipTrue: 3},
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_TGKILL, SkipTrue: 4}, // -> 13
		/* 9 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_RT_TGSIGQUEUEINFO, SkipTrue: 3},
		/* 10 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_FCNTL, SkipTrue: 4, SkipFalse: 16}, // -> 15, 27
		/* 11 */ bpf.LoadAbsolute{Off: offArg0, Size: 4},
		/* 12 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: t, SkipTrue: 13, SkipFalse: 14}, // -> 26, 27
		/* 13 */ bpf.LoadAbsolute{Off: offArg1, Size: 4},
		/* 14 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: t, SkipTrue: 11, SkipFalse: 12},
		/* 15 */ bpf.LoadAbsolute{Off: offArg1, Size: 4}, // fcntl's command
		/* 16 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.F_SETSIG, SkipTrue: 9, SkipFalse: 10},
		// Another ABI: either of the first two arguments, and fcntl.
		/* 17 */ bpf.LoadAbsolute{Off: offArg0, Size: 4},
		/* 18 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: t, SkipTrue: 7}, // -> 26
		/* 19 */ bpf.LoadAbsolute{Off: offArg1, Size: 4},
		/* 20 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: t, SkipTrue: 5},
		/* 21 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.F_SETSIG, SkipFalse: 5}, // -> 27
		/* 22 */ bpf.LoadAbsolute{Off: offNr, Size: 4},
		/* 23 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: compatFcntl, SkipTrue: 2},
		/* 24 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: compatFcntl64, SkipTrue: 1},
		/* 25 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: x32Bit | unix.SYS_FCNTL, SkipFalse: 1},
		/* 26 */ deny,
		/* 27 */ allow,
	}
	return assemble(prog)
}
