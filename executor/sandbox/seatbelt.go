package sandbox

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// The Seatbelt renderer: a Policy as a profile for macOS's sandbox-exec. It
// is pure (no filesystem, no build tag) so that it is tested everywhere; the
// darwin Sandbox runs what it renders.
//
// Rule precedence. When several rules of a profile match one operation, the
// last of them in the profile decides; there is no "most specific path
// wins". anthropic-experimental/sandbox-runtime relies on it, rendering
// (allow file-read*) and then (deny file-read* (subpath ...)) for a denied
// path, and its macOS test (test/sandbox/macos-seatbelt.test.ts) checks that
// the path can then be neither read nor moved; a measurement with two
// profiles that differ only in rule order (allow then deny blocks the read,
// deny then allow serves it) reached the same conclusion. openai/codex does
// not rely on it at all: it writes each exception into the allowance itself
// with (require-not ...) filters.
//
// This profile does both for hidden paths: every allowance that could cover
// a hidden path excludes it with require-not, and the denials of hidden
// paths come last as well, so that the result does not hang on precedence.
// Two denials rely on it alone (a broad allowance comes before them): unix
// sockets beneath a hidden path, and the removal or renaming of a directory
// that holds one.

// sandboxExec is macOS's sandbox launcher. Only this path is ever run,
// never one found through PATH, which a command could have changed.
const sandboxExec = "/usr/bin/sandbox-exec"

// SeatbeltProfile renders p as a Seatbelt profile for sandbox-exec -p. It is
// "" when nothing is confined (mode off with the network on): the command
// is then started as it is. A policy it cannot render faithfully (an
// unknown mode; a path that is not absolute and clean or holds a control
// character) gets a profile that denies everything, so that no command runs
// under a weaker one; New refuses such a policy before it gets this far.
func SeatbeltProfile(p Policy) string {
	if seatbeltCheck(p) != nil {
		return seatbeltDenyAll
	}
	switch p.Mode {
	case Off:
		if !p.NetworkOff {
			return ""
		}
		return seatbeltOffNetworkOff
	case WorkspaceWrite, ReadOnly:
		return confinedProfile(p)
	}
	return seatbeltDenyAll // unreachable: seatbeltCheck refuses other modes
}

// seatbeltDenyAll is what a policy that cannot be rendered gets: sandbox-exec
// cannot even start the command under it.
const seatbeltDenyAll = `(version 1)
; This policy cannot be rendered faithfully: nothing is allowed.
(deny default)
`

// seatbeltOffNetworkOff is mode off with the network off: everything but IP.
const seatbeltOffNetworkOff = `(version 1)
; sema command sandbox: mode off, network off.
; Files, processes and services are not confined.
(allow default)
; IP networking, v4 and v6, is denied: connecting and sending (remote),
; binding and accepting (local). Unix-domain sockets are not IP and stay.
(deny network* (local ip "*:*") (remote ip "*:*"))
`

// seatbeltCheck reports why p cannot be rendered, nil when it can.
func seatbeltCheck(p Policy) error {
	if _, err := ParseMode(string(p.Mode)); err != nil {
		return err
	}
	if !p.Mode.Confined() {
		return nil // no path is rendered
	}
	for _, set := range []struct {
		what  string
		paths []string
	}{{"writable root", p.Writable}, {"device", p.Devices}, {"hidden path", p.Hidden}} {
		for _, x := range set.paths {
			if why := seatbeltPathProblem(x); why != "" {
				return fmt.Errorf("the %s %q cannot be written into a Seatbelt profile: %s", set.what, x, why)
			}
		}
	}
	return nil
}

// seatbeltPathProblem says what keeps x out of a profile, "" when nothing.
// Seatbelt compares a rule's path with the real path an operation names, so
// a relative or unclean one would never match (and a hidden path would not
// be hidden). A control character cannot be in a string literal safely:
// the profile travels as a C string, which a NUL would cut, and whether the
// profile reader keeps a newline or tab as it is is not documented.
func seatbeltPathProblem(x string) string {
	switch {
	case !strings.HasPrefix(x, "/"):
		return "not an absolute path"
	case path.Clean(x) != x:
		return "not a clean path"
	case strings.ContainsFunc(x, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "it holds a control character"
	}
	return ""
}

// sbplString is x as an SBPL string literal: a backslash and a double quote
// are escaped, which is all a string literal needs to hold any other
// character as it is (seatbeltCheck keeps control characters out).
func sbplString(x string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(x) + `"`
}

// seatbeltArgv is sandbox-exec's argv for running name with argv under
// profile. "--" ends sandbox-exec's options whatever name looks like. A name
// without a slash is made relative to the working directory, which is what
// os.StartProcess would run: sandbox-exec would look it up in PATH.
func seatbeltArgv(profile, name string, argv []string) []string {
	if !strings.Contains(name, "/") {
		name = "./" + name
	}
	out := []string{sandboxExec, "-p", profile, "--", name}
	if len(argv) > 1 {
		out = append(out, argv[1:]...)
	}
	return out
}

// confinedProfile renders workspace-write and read-only, which differ only
// in their writable roots.
func confinedProfile(p Policy) string {
	var b strings.Builder
	net := "on"
	if p.NetworkOff {
		net = "off"
	}
	fmt.Fprintf(&b, "(version 1)\n; sema command sandbox: mode %s, network %s.\n", p.Mode, net)
	b.WriteString(seatbeltBase)

	// Reading, executing and mapping code: everywhere but the hidden paths.
	b.WriteString("\n; Files are readable, and programs runnable, everywhere but beneath the hidden paths.\n")
	b.WriteString("(allow file-read* process-exec* file-map-executable")
	if len(p.Hidden) > 0 {
		writeSubpathExcept(&b, "/", p.Hidden)
	}
	b.WriteString(")\n")

	// Writing beneath the writable roots, cut around the hidden paths.
	roots := slices.DeleteFunc(slices.Clone(p.Writable), func(w string) bool { return hiddenAt(p.Hidden, w) })
	if len(roots) > 0 {
		b.WriteString("\n; Creating, writing, removing and renaming files (and their modes, times and\n" +
			"; extended attributes) only beneath the writable roots, never beneath a hidden path.\n")
		b.WriteString("(allow file-write*")
		for _, w := range roots {
			writeSubpathExcept(&b, w, p.Hidden)
		}
		b.WriteString(")\n")
	}

	devices := slices.DeleteFunc(slices.Clone(p.Devices), func(d string) bool { return hiddenAt(p.Hidden, d) })
	if len(devices) > 0 {
		b.WriteString("\n; The character devices a shell writes and controls (/dev/null, /dev/tty, ...):\n" +
			"; their data only, and only while each is still a character device.\n")
		for _, d := range devices {
			fmt.Fprintf(&b, "(allow file-write-data file-ioctl\n  (require-all (literal %s) (vnode-type CHARACTER-DEVICE)))\n", sbplString(d))
		}
	}
	b.WriteString(seatbeltTerminals)

	if p.NetworkOff {
		b.WriteString(seatbeltNetworkOff)
	} else {
		b.WriteString(seatbeltNetworkOn)
	}

	if len(p.Hidden) > 0 {
		b.WriteString("\n; The hidden paths: neither readable, nor writable, nor runnable, nor linked\n" +
			"; to, nor reachable as a unix socket. Last, so that they override every\n" +
			"; allowance above. (No hard link is allowed anywhere: a link to a hidden file\n" +
			"; would give it a name that no rule hides.)\n")
		b.WriteString("(deny file-read* file-write* file-link process-exec* file-map-executable")
		for _, h := range p.Hidden {
			fmt.Fprintf(&b, "\n  (literal %s) (subpath %s)", sbplString(h), sbplString(h))
		}
		b.WriteString(")\n")
		for _, h := range p.Hidden {
			fmt.Fprintf(&b, "(deny network-outbound (remote unix-socket (subpath %s)))\n", sbplString(h))
			fmt.Fprintf(&b, "(deny network-bind (local unix-socket (subpath %s)))\n", sbplString(h))
		}
	}
	if anc := movableAncestors(p.Hidden, roots); len(anc) > 0 {
		b.WriteString("\n; Seatbelt matches paths, not files: renaming or removing a directory that holds\n" +
			"; a hidden path would take the hidden path out from under the rules above.\n")
		b.WriteString("(deny file-write-unlink")
		for _, a := range anc {
			fmt.Fprintf(&b, "\n  (literal %s)", sbplString(a))
		}
		b.WriteString(")\n")
	}
	return b.String()
}

// writeSubpathExcept writes a filter for what is beneath root but beneath
// none of the hidden paths within it.
func writeSubpathExcept(b *strings.Builder, root string, hidden []string) {
	var inside []string
	for _, h := range hidden {
		if Within(h, root) {
			inside = append(inside, h)
		}
	}
	if len(inside) == 0 {
		fmt.Fprintf(b, "\n  (subpath %s)", sbplString(root))
		return
	}
	fmt.Fprintf(b, "\n  (require-all (subpath %s)", sbplString(root))
	for _, h := range inside {
		writeExclusion(b, h, "    ")
	}
	b.WriteString(")")
}

// writeExclusion writes the require-not filters that leave h and everything
// beneath it out of a require-all. The literal is there besides the subpath
// because openai/codex found that subpath alone let the protected directory
// itself be created.
func writeExclusion(b *strings.Builder, h, indent string) {
	fmt.Fprintf(b, "\n%s(require-not (literal %s))\n%s(require-not (subpath %s))", indent, sbplString(h), indent, sbplString(h))
}

// hiddenAt reports whether x is a hidden path or lies beneath one.
func hiddenAt(hidden []string, x string) bool {
	return slices.ContainsFunc(hidden, func(h string) bool { return Within(x, h) })
}

// movableAncestors are the directories above a hidden path that lie beneath
// a writable root: a command could rename or remove them, taking the hidden
// path along to a name no rule hides. Those outside every writable root
// cannot be changed anyway.
func movableAncestors(hidden, roots []string) []string {
	var out []string
	for _, h := range hidden {
		for dir := path.Dir(h); dir != "/"; dir = path.Dir(dir) {
			if slices.ContainsFunc(roots, func(w string) bool { return Within(dir, w) }) && !slices.Contains(out, dir) {
				out = append(out, dir)
			}
		}
	}
	slices.Sort(out)
	return out
}

// seatbeltBase is what every confining profile grants besides files and
// network: what a shell and ordinary development tools need to run, and no
// more. It was drawn up from openai/codex's seatbelt_base_policy.sbpl and
// anthropic-experimental/sandbox-runtime's macOS profile (both descend from
// Chromium's), keeping what a command line needs and leaving out the
// services that act for a process outside its sandbox (LaunchServices,
// which opens applications; the keychain; the pasteboard).
const seatbeltBase = `; Anything not allowed below is denied.
(deny default)

; Processes: a shell forks and runs programs, which inherit this profile.
; Signals, process inspection and task ports (another process's memory)
; reach only processes of this same sandbox: never the executor, never any
; other program of the user's.
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow mach-priv-task-port (target same-sandbox))

; System facts runtimes and build tools read: the CPU and memory layout
; (thread pools, instruction set features), OS name and version, limits
; (xargs sizes its command lines by kern.argmax), the process list (ps,
; pgrep), the routing table (interface listings), Rosetta. Not
; kern.procargs2 and its kind, which show other processes' arguments and
; environment.
(allow sysctl-read
  (sysctl-name-prefix "hw.")
  (sysctl-name-prefix "machdep.cpu.")
  (sysctl-name "machdep.ptrauth_enabled")
  (sysctl-name "kern.argmax")
  (sysctl-name "kern.boottime")
  (sysctl-name "kern.hostname")
  (sysctl-name "kern.maxfiles")
  (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "kern.maxproc")
  (sysctl-name "kern.ngroups")
  (sysctl-name "kern.osproductversion")
  (sysctl-name "kern.osrelease")
  (sysctl-name "kern.ostype")
  (sysctl-name "kern.osvariant_status")
  (sysctl-name "kern.osversion")
  (sysctl-name "kern.secure_kernel")
  (sysctl-name "kern.tcsm_available")
  (sysctl-name "kern.usrstack64")
  (sysctl-name "kern.version")
  (sysctl-name-prefix "kern.proc.all")
  (sysctl-name-prefix "kern.proc.pgrp.")
  (sysctl-name-prefix "kern.proc.pid.")
  (sysctl-name-prefix "net.routetable.")
  (sysctl-name "sysctl.proc_cputype")
  (sysctl-name "sysctl.proc_translated")
  (sysctl-name "vm.loadavg"))
; Two queries that pass a value in and so count as writes: Java's CPU type
; probe, and V8 turning on a side-channel mitigation for its own threads.
(allow sysctl-write
  (sysctl-name "kern.grade_cputype")
  (sysctl-name "kern.tcsm_enable"))
; Host statistics: the CPU count and load through host_processor_info
; (Node's os.cpus()).
(allow mach-host*)

; Services a shell and its tools look up: user and group names (getpwuid:
; the prompt, id, git's author), system notifications (time zone changes),
; logging, preferences (cfprefsd answers reads; it refuses writes to a
; sandbox without user-preference-write), the per-user temporary and cache
; directory names, and power assertions (caffeinate).
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.opendirectoryd.membership")
  (global-name "com.apple.system.DirectoryService.libinfo_v1")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.logd")
  (global-name "com.apple.cfprefsd.daemon")
  (global-name "com.apple.cfprefsd.agent")
  (global-name "com.apple.bsd.dirhelper")
  (global-name "com.apple.PowerManagement.control"))
(allow user-preference-read)
(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))

; POSIX semaphores and shared memory (Python's multiprocessing and its kind).
(allow ipc-posix-sem)
(allow ipc-posix-shm)
`

// seatbeltTerminals are the devices beside the policy's own: pseudo-
// terminals, the descriptors a command holds, dyld's DTrace helper.
const seatbeltTerminals = `
; Pseudo-terminals: opening new ones (script, expect, test suites) and
; using the one a command was given. Their data and control only.
(allow pseudo-tty)
(allow file-write-data file-ioctl (literal "/dev/ptmx"))
(allow file-write-data file-ioctl
  (require-all (regex #"^/dev/ttys[0-9]+$") (vnode-type CHARACTER-DEVICE)))
; The descriptors a command already holds, opened again through /dev/fd
; (bash's >(...), /dev/stdout): that duplicates one, and never widens it.
(allow file-write-data (subpath "/dev/fd"))
; dyld registers a program's DTrace probes through this device.
(allow file-write-data file-ioctl (literal "/dev/dtracehelper"))
`

// seatbeltNetworkOn lets a command use the network as the user can.
const seatbeltNetworkOn = `
; Network on: IP and unix sockets of every kind, and the services that
; resolve names, read proxy settings and check TLS certificates.
(allow network*)
(allow system-socket)
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.configd")
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.networkd")
  (global-name "com.apple.trustd")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.ocspd"))
`

// seatbeltNetworkOff keeps unix-domain sockets only: under (deny default)
// IP sockets cannot even be created.
const seatbeltNetworkOff = `
; Network off: unix-domain sockets only (local tools and their daemons:
; ssh-agent, docker, language servers). No IP, v4 or v6, in or out, and
; none of the services that would fetch for a command.
(allow system-socket (socket-domain AF_UNIX))
(allow network-bind (local unix-socket))
(allow network-outbound (remote unix-socket))
`
