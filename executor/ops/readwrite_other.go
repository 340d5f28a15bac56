//go:build !linux && !darwin

package ops

import (
	"context"

	"github.com/sema-agent/sema/protocol"
)

// File is implemented on Linux and darwin only (fsys.go): elsewhere no
// backend exists for its atomic writes, real paths and containment, so it
// answers every kind not_supported, and FileKinds declares none (§3.2:
// absence is honest).
func File(ctx context.Context, env *Env, req Request, sink Sink) protocol.Outcome {
	return protocol.Fail(protocol.ErrNotSupported, "file instructions are implemented on Linux and darwin only; %q is not supported on this platform", req.Kind)
}

// FileKinds lists the kinds File implements here: none.
func FileKinds(env *Env) []protocol.InstructionKind { return nil }
