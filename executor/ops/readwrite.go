//go:build linux || darwin

package ops

import (
	"context"
	"strconv"

	"github.com/sema-agent/sema/protocol"
)

// File runs every instruction kind that is not exec (§3.1): the read, write,
// stat and directory families. Start here; each family has its own file:
//
//	read.go           readTextFile, readTextLines, readBinaryFile
//	write.go          writeFile, writeFileExclusive, appendFile (writeFileGuarded: absent, see there)
//	write_payload.go  the payload sub-sequence (§3.4) into a staging file
//	stat.go           fileInfo, listDir, exists, canonicalPath, readLink (statBatch: absent)
//	dirs.go           createDir, remove, createTempDir, createTempFile
//	contain.go        real paths and the containment policy (§6.6)
//	oserr.go          OS errors and stopped contexts as §3.3 error codes
//	walk.go           the descriptor-relative walk the portable backend uses
//	fsys*.go          the backends: the few system calls Linux and darwin do differently
//
// docs/fs-ops.md records every behaviour the spec leaves open.
//
// File returns exactly one outcome and, for the read family, emits the
// content to sink as data chunks first. It honours req.Timeout and ctx as
// ops.go describes. A kind outside FileKinds is answered not_supported.
func File(ctx context.Context, env *Env, req Request, sink Sink) protocol.Outcome {
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, req.Timeout, errTimedOut)
		defer cancel()
	}
	op := &fileOp{ctx: ctx, req: req, sink: sink, contain: policyOf(env)}
	if env != nil {
		op.tempDir = env.TempDir
	}
	if !protocol.ArgsFits(req.Kind, req.Args) {
		return failf(protocol.ErrInvalid, "the arguments of %q are a %T, which does not fit that kind", req.Kind, req.Args)
	}
	if ctx.Err() != nil {
		return interrupted(ctx, req, false, false)
	}
	switch req.Kind {
	case protocol.KindReadTextFile:
		return op.readFile(req.Args.(protocol.PathArgs).Path, true)
	case protocol.KindReadBinaryFile:
		return op.readFile(req.Args.(protocol.PathArgs).Path, false)
	case protocol.KindReadTextLines:
		return op.readLines(req.Args.(protocol.ReadLinesArgs))
	case protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindAppendFile:
		return op.write(req.Args.(protocol.WriteArgs))
	case protocol.KindWriteFileGuarded:
		return guardedAbsent()
	case protocol.KindFileInfo:
		return op.fileInfo(req.Args.(protocol.PathArgs).Path)
	case protocol.KindListDir:
		return op.listDir(req.Args.(protocol.PathArgs).Path)
	case protocol.KindExists:
		return op.exists(req.Args.(protocol.PathArgs).Path)
	case protocol.KindCanonicalPath:
		return op.canonicalPath(req.Args.(protocol.PathArgs).Path)
	case protocol.KindReadLink:
		return op.readLink(req.Args.(protocol.PathArgs).Path)
	case protocol.KindCreateDir:
		return op.createDir(req.Args.(protocol.DirArgs))
	case protocol.KindRemove:
		return op.remove(req.Args.(protocol.DirArgs))
	case protocol.KindCreateTempDir:
		return op.createTemp(req.Args.(protocol.TempDirArgs).Prefix, "", true)
	case protocol.KindCreateTempFile:
		a := req.Args.(protocol.TempFileArgs)
		return op.createTemp(a.Prefix, a.Suffix, false)
	case protocol.KindStatBatch:
		return failf(protocol.ErrNotSupported, "statBatch is not implemented by this executor and not declared in its supports (it is never dispatched today, §8); use fileInfo per path")
	}
	return failf(protocol.ErrNotSupported, "%q is not a file instruction; this executor's file operations do not run it", req.Kind)
}

// FileKinds lists exactly the kinds File implements honestly, in the spec's
// order: the executor declares them in hello.supports (§3.2). It leaves out
// writeFileGuarded (no atomic check-and-replace exists on Linux or darwin; see
// guardedAbsent) and statBatch (never dispatched today). The list does not
// depend on env and does not vary between connections.
func FileKinds(env *Env) []protocol.InstructionKind {
	_ = env
	return []protocol.InstructionKind{
		protocol.KindReadTextFile, protocol.KindReadTextLines, protocol.KindReadBinaryFile,
		protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindAppendFile,
		protocol.KindFileInfo, protocol.KindListDir, protocol.KindCanonicalPath, protocol.KindExists,
		protocol.KindReadLink, protocol.KindCreateDir, protocol.KindRemove,
		protocol.KindCreateTempDir, protocol.KindCreateTempFile,
	}
}

// fileOp is one running file instruction.
type fileOp struct {
	ctx     context.Context
	req     Request
	sink    Sink
	contain *policy
	tempDir string // Env.TempDir
	// started is set once the op began on the machine: a staging file, an
	// emitted chunk, any change. A cancel then answers killed.
	started bool
	// changed is set once the op left a lasting change (a directory
	// created, an entry removed): stopping then leaves it partly done.
	changed bool
}

// stopped is the outcome when the op's context is done.
func (op *fileOp) stopped() protocol.Outcome {
	return interrupted(op.ctx, op.req, op.started, op.changed)
}

// badPath refuses a path that is not absolute and normalized (§3.1): the
// executor resolves nothing itself (§6.6).
func badPath(p string) *protocol.Failure {
	if protocol.ValidAbsPath(p) {
		return nil
	}
	f := failf(protocol.ErrInvalid, "path %q is not absolute and normalized; the executor resolves nothing itself", p)
	return &f
}

// qpath formats a path for a message.
func qpath(p string) string { return strconv.Quote(p) }
