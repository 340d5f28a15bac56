package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The network filter, for --sandbox-network off: a seccomp program that
// lets socket(2) open unix-domain and netlink sockets only, and refuses
// every other family with EACCES, as a security module refuses it: the
// internet (AF_INET, AF_INET6), raw frames (AF_PACKET, for a root
// executor in mode off), the host of a virtual machine (AF_VSOCK), and
// every family a kernel has or will have. It also refuses io_uring_setup
// (ENOSYS, which programs take as "no io_uring here"), since io_uring can
// open a socket without calling socket(2), every system call of another
// architecture's ABI (a 32-bit program could reach socket through
// socketcall) and, on amd64, of the x32 ABI.
//
// The program is small enough to be written out here; a general seccomp
// library was not used because the ones at hand let a foreign
// architecture's calls through to their default action.

// seccomp_data's layout (linux/seccomp.h).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // the low half on little-endian machines
)

// auditArch is the AUDIT_ARCH_* value of this build's architecture.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	case "riscv64":
		return unix.AUDIT_ARCH_RISCV64, nil
	}
	return 0, fmt.Errorf("--sandbox-network off is not available on %s", runtime.GOARCH)
}

// networkFilter assembles the filter.
func networkFilter() ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const x32Bit = 0x40000000
	retErrno := func(e unix.Errno) bpf.Instruction {
		return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
	}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	prog := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: offArch, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		/* 2 */ retErrno(unix.ENOSYS), // another architecture's ABI
		/* 3 */ bpf.LoadAbsolute{Off: offNr, Size: 4},
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipTrue: 0, SkipFalse: 1},
		/* 5 */ retErrno(unix.ENOSYS), // x32 (never true elsewhere: numbers stay small)
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IO_URING_SETUP, SkipFalse: 1},
		/* 7 */ retErrno(unix.ENOSYS),
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKET, SkipFalse: 4}, // -> 13
		/* 9 */ bpf.LoadAbsolute{Off: offArg0, Size: 4},
		/* 10 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipTrue: 2}, // -> 13
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_NETLINK, SkipTrue: 1},
		/* 12 */ retErrno(unix.EACCES),
		/* 13 */ allow,
	}
	return assemble(prog)
}

// assemble turns a seccomp program into the kernel's form.
func assemble(prog []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// loadFilterThread installs filter on the calling thread alone (no TSYNC).
// no_new_privs must already be set.
func loadFilterThread(filter []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	return nil
}
