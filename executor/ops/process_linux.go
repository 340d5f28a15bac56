package ops

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sema-agent/sema/internal/procstat"
)

// waitsUnreaped: on Linux the waiter first waits for the leader's exit with
// waitid(WNOWAIT), leaving its zombie in place until it is released.
const waitsUnreaped = true

const pPID = 1 // P_PID, waitid's idtype for one pid

// waitExited blocks until the process pid has exited, without reaping it.
//
// It waits in the Go netpoller on a pidfd, which becomes readable when the
// process exits, so no OS thread sits in a blocking waitid meanwhile: with
// 50 commands running the executor held 54 threads, and now holds 5. Where
// pidfds cannot be polled (Linux before 5.10), it falls back to the
// blocking wait.
func waitExited(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return waitExitedBlocking(pid)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return waitExitedBlocking(pid)
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		e := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case e == unix.EINTR:
			return false
		case e != nil:
			werr = e
			return true
		}
		return info.Signo == int32(unix.SIGCHLD) // 0 while it runs: wait for the pidfd
	})
	if err != nil {
		// The pidfd is not pollable here: wait the blocking way.
		return waitExitedBlocking(pid)
	}
	return werr
}

// waitExitedBlocking is waitExited with a blocking waitid.
func waitExitedBlocking(pid int) error {
	var info [16]uint64 // siginfo_t, 128 bytes; the contents are not used
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return e
		}
	}
}

// exitedNow reports, without blocking or reaping, whether the process pid
// has exited.
func exitedNow(pid int) bool {
	var info [16]uint64 // siginfo_t; si_signo is SIGCHLD when a child was found
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
		uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT|syscall.WNOHANG, 0, 0)
	return e == 0 && syscall.Signal(*(*int32)(unsafe.Pointer(&info[0]))) == syscall.SIGCHLD
}

// groupHasLiveMember reports whether a process that is not a zombie belongs
// to the process group pgid, by reading /proc/<pid>/stat. When /proc cannot
// be read it answers true: it never claims a group dead that it cannot see.
func groupHasLiveMember(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		st, ok := procstat.Read(name)
		if ok && st.PGRP == pgid && !st.Zombie() {
			return true
		}
	}
	return false
}

// outputPipe is a pipe for one of a command's output streams: the read end
// non-blocking, in the netpoller, the write end a blocking descriptor for
// the child that the netpoller never sees. (os.Pipe registers both ends
// with the poller, and the write end is unregistered again when the
// executor closes its copy after the spawn: four system calls an exec does
// not need.)
func outputPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	// A larger pipe lets one read take a whole chunk and the command run
	// ahead while a chunk is on its way. Best effort: a user over
	// fs.pipe-user-pages-soft keeps the default 64 KiB, which only costs
	// speed.
	_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, outputPipeBytes)
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// outputPipeBytes is the capacity asked for each output pipe. It is
// charged to the user's pipe pages (fs.pipe-user-pages-soft, 64 MiB by
// default) for as long as the command runs, so it stays moderate, and
// within drainBudget: what a reader drains after the group died is at
// most one pipe's worth of output written before it.
const outputPipeBytes = 1 << 20
