package ops

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sema-agent/sema/protocol"
)

// This file is the containment policy (§6.6) as pure decisions over real
// paths: which real paths an op may touch, and which it must never serve.
// Finding the real path of an object is the platform's job (contain.go on
// Linux; exec's working directory everywhere); deciding is this file's.
//
// Two rules, checked in this order:
//
//  1. The executor's own files are never served: the paths in
//     Env.NeverServe (its state dir: key, record, lock, procs, status; its
//     machine-wide lock) with everything below them, under their own names
//     and by identity under any other (a hard link, a bind mount); and this
//     process and every process it started in /proc (/proc/self,
//     /proc/<pid>, /proc/<tid> of each of its threads, /proc/<pid> of each
//     descendant), where memory, environment and open descriptors are. This
//     holds whatever Env.AllowedRoots say, also for "/".
//  2. Everything else must lie inside some allowed root, when roots are set.
//
// A refusal is permission_denied that names the path; nothing is ever
// redirected (§6.6).

// AllowPathFlag is the flag of `sema device serve` that widens containment;
// refusals name it so that a user knows what would allow a path.
const AllowPathFlag = "--allow-path"

// policy is the containment of one op.
type policy struct {
	// roots are the canonical allowed roots; nil means no roots are
	// configured (every path, but for never).
	roots []string
	// never are the canonical paths of the executor's own files.
	never []string
	// ids are the current identities of the files and directories of
	// never, so that one reached under another name (a hard link, a bind
	// mount) is refused as itself; nil for none.
	ids *ownIDs
	// pid is this process, whose /proc entries are never served.
	pid int
	// ownProcess reports whether a number in /proc is a thread of this
	// process (its /proc/<tid> is the process as well) or a process it
	// started.
	ownProcess func(n int) bool
}

// fileID is a file's identity: the device and inode numbers.
type fileID struct{ dev, ino uint64 }

// Prepare resolves env's containment once, so that ops do not resolve the
// roots again for each instruction: a root that is a symlink then counts as
// the target it had when Prepare ran. Without Prepare each op resolves them
// itself. Call it before any op runs, and not again.
func (env *Env) Prepare() {
	env.prepared = buildPolicy(env)
}

// policyOf returns env's containment: the prepared one, or a new one.
func policyOf(env *Env) *policy {
	if env == nil {
		return buildPolicy(nil)
	}
	if env.prepared != nil {
		return env.prepared
	}
	return buildPolicy(env)
}

func buildPolicy(env *Env) *policy {
	p := &policy{pid: os.Getpid(), ownProcess: isOwnProcess}
	if env == nil {
		return p
	}
	if len(env.AllowedRoots) > 0 {
		p.roots = make([]string, 0, len(env.AllowedRoots))
		for _, r := range env.AllowedRoots {
			if filepath.IsAbs(r) { // a relative root would need a base; it contains nothing
				p.roots = append(p.roots, canonical(r))
			}
		}
	}
	for _, n := range env.NeverServe {
		if filepath.IsAbs(n) {
			p.never = append(p.never, canonical(n))
		}
	}
	p.ids = newOwnIDs(p.never)
	return p
}

// canonical is the absolute path p through its symlinks: when p does not
// exist (yet), its deepest existing ancestor through its symlinks joined
// with the rest, as the kernel will see it once it is created.
func canonical(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == "/" {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// hasRoots reports whether allowed roots are configured.
func (p *policy) hasRoots() bool { return p.roots != nil }

// below reports whether real is dir or lies under it.
func below(real, dir string) bool {
	return dir == "/" || real == dir || strings.HasPrefix(real, dir+"/")
}

// allowed reports whether real lies inside some root.
func (p *policy) allowed(real string) bool {
	if !p.hasRoots() {
		return true
	}
	for _, r := range p.roots {
		if below(real, r) {
			return true
		}
	}
	return false
}

// own reports whether real is one of the executor's own files (rule 1).
func (p *policy) own(real string) bool {
	for _, n := range p.never {
		if below(real, n) {
			return true
		}
	}
	return p.ownProc(real)
}

// ownProc reports whether real is this process's entry in /proc.
func (p *policy) ownProc(real string) bool {
	rest, ok := strings.CutPrefix(real, "/proc/")
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(rest, "/")
	switch name {
	case "self", "thread-self":
		return true
	}
	n, err := strconv.Atoi(name)
	if err != nil || n <= 0 || strconv.Itoa(n) != name {
		return false
	}
	return n == p.pid || (p.ownProcess != nil && p.ownProcess(n))
}

// check refuses real (the real path of path, as the instruction named it)
// when rule 1 or rule 2 says so; nil means allowed. Rule 1 holds for the
// path as named too: /proc/self/fd/N leads to whatever this process holds
// open, whose real path is elsewhere.
func (p *policy) check(path, real string) *protocol.Failure {
	switch {
	case p.own(real) || p.ownProc(path):
		f := ownRefusal(path, real)
		return &f
	case !p.allowed(real):
		where := strconv.Quote(path) + " is"
		if path != real {
			where = strconv.Quote(path) + " resolves to " + strconv.Quote(real) + ", which is"
		}
		f := failf(protocol.ErrPermissionDenied, "%s outside every allowed root (%s): refused by this device's containment policy; "+
			"`sema device serve %s %s` would serve it",
			where, strings.Join(p.roots, ", "), AllowPathFlag, suggestRoot(real))
		return &f
	}
	return nil
}

// checkID refuses an opened object that is one of the executor's own files
// or directories under another name (a hard link, a bind mount).
func (p *policy) checkID(path string, id fileID) *protocol.Failure {
	if p.ids.owner(id) == "" {
		return nil
	}
	f := failf(protocol.ErrPermissionDenied, "%q is a link to one of the executor's own files (a hard link, or a bind mount of its directory): it is never served, whatever %s says", path, AllowPathFlag)
	return &f
}

func ownRefusal(path, real string) protocol.Failure {
	if path == real {
		return failf(protocol.ErrPermissionDenied, "%q is the executor's own (its key, record, lock or status, or its process in /proc): it is never served, whatever %s says",
			path, AllowPathFlag)
	}
	return failf(protocol.ErrPermissionDenied, "%q resolves to %q, which is the executor's own (its key, record, lock or status, or its process in /proc): it is never served, whatever %s says",
		path, real, AllowPathFlag)
}

// checkRemove refuses removing real when that would remove an allowed root
// or one of the executor's own files with it: a root itself, or a directory
// that holds a root or an own file.
func (p *policy) checkRemove(path, real string) *protocol.Failure {
	if f := p.check(path, real); f != nil {
		return f
	}
	for _, r := range p.roots {
		if below(r, real) {
			what := "an allowed root"
			if r != real {
				what = "a directory that holds the allowed root " + strconv.Quote(r)
			}
			f := failf(protocol.ErrPermissionDenied, "remove %q: it is %s; removing it is refused by this device's containment policy", path, what)
			return &f
		}
	}
	for _, n := range p.never {
		if below(n, real) {
			f := failf(protocol.ErrPermissionDenied, "remove %q: it holds the executor's own files (%s), which are never removed through the lane", path, n)
			return &f
		}
	}
	return nil
}

// suggestRoot is the directory a refusal proposes to allow: the directory
// that holds real (real itself when it is a top-level name).
func suggestRoot(real string) string {
	if dir := filepath.Dir(real); dir != "/" {
		return dir
	}
	return real
}
