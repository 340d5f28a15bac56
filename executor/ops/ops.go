// Package ops holds the bodies of the instruction kinds (§3 of the device
// executor protocol): what the agent's tools actually do on the user's
// machine. An op knows nothing about sockets, generations or the outbox: it
// takes a Request, writes its output stream to a Sink, and returns exactly
// one Outcome. The executor runtime numbers the chunks, delivers them, and
// sends the outcome as the instruction's result.
//
// Cancellation: the ctx passed to an op is cancelled with a cause
// (context.Cause). ErrCancelled means the server sent cancel (answer
// cancelled killed, or not_started when nothing had begun); any other cause
// (fence, shutdown) stops the work the same way and answers aborted. An op
// enforces Request.Timeout itself and answers timeout only when it killed the
// work and knows it is dead (§3.3, R12).
package ops

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sema-agent/sema/executor/sandbox"
	"github.com/sema-agent/sema/protocol"
)

// ErrCancelled is the context cause for a server cancel (R11).
var ErrCancelled = errors.New("cancelled by the server")

// Sink receives one instruction's output stream, in order. Implementations
// may block (backpressure); an error means the stream cannot be delivered
// and the op should stop.
type Sink interface {
	// Data emits one stdout, stderr or data chunk of at most MaxChunkBytes.
	// p is only valid during the call.
	Data(kind protocol.ChunkKind, p []byte) error
	// Exit emits the exit chunk: exactly once per exec stream, last (§4).
	Exit(code int) error
}

// MaxChunkBytes is the most raw bytes an op puts in one chunk: 256 KiB,
// four times §4's "good default", since per chunk go a frame, an ack and a
// wake-up of each goroutine on the way, and fast output needs fewer. It stays
// inside every bound: its frame (base64 and the JSON around it, about
// 342 KiB) is a third of maxFrameBytes (§2.1); the executor's window (half
// the lane's reorder buffer, 1 MiB, §4) still holds four chunks on their
// way, and the lane's pending-delivery bound (2 MiB) eight.
const MaxChunkBytes = 4 * protocol.RecommendedChunkBytes

// Env is the executor's configuration that ops need. It is shared by all
// instructions and must not be changed while ops run.
type Env struct {
	// WorkspaceRoot is the enrolled root: the cwd of an exec without cwd.
	WorkspaceRoot string
	// Shell runs commands as Shell -c command; "" means /bin/sh.
	Shell string
	// OutputCap bounds each of stdout and stderr of one exec; output past it
	// is dropped and reported in truncated. 0 means DefaultOutputCap.
	OutputCap int64
	// KillGrace is the time between SIGTERM and SIGKILL to a process group.
	// 0 means DefaultKillGrace.
	KillGrace time.Duration
	// AllowedRoots, when non-empty, is the containment policy (§6.6): a path
	// whose canonical form is outside every root is refused
	// permission_denied, never redirected; "/" serves every path. Empty
	// means no roots (the executor always sets them: containment is on by
	// default there). Exec's working directory is contained too; its
	// command text is not (it is a shell).
	AllowedRoots []string
	// NeverServe are the executor's own files and directories (its state
	// dir, its lock files): refused for every kind and as exec's working
	// directory, with everything below them, whatever AllowedRoots say, and
	// never removed with a directory that holds them. This process's
	// entries in /proc are refused always (policy.go).
	NeverServe []string
	// TempDir is where createTempDir and createTempFile create; "" means
	// os.TempDir() at the time of the op.
	TempDir string
	// Sandbox confines every command and follows its process tree; nil
	// runs commands unconfined, followed by their process group alone.
	Sandbox *sandbox.Sandbox

	// prepared is the containment resolved by Prepare; nil: each op
	// resolves it.
	prepared *policy
}

// Defaults for Env's zero values.
const (
	DefaultShell     = "/bin/sh"
	DefaultOutputCap = 1 << 30 // 1 GiB per stream
	DefaultKillGrace = 2 * time.Second
)

// Request is one instruction to run.
type Request struct {
	InstructionID string
	Kind          protocol.InstructionKind
	Args          protocol.Args // the Args type of Kind (protocol.ArgsFits)
	Cwd           string        // "" when absent
	ShellEnv      map[string]string
	Timeout       time.Duration // from timeoutMs; 0 means no limit of its own
	// Payload delivers the write family's payload frames (§3.4) in arrival
	// order; nil for other kinds. It is closed if no more will come.
	Payload <-chan *protocol.Payload
	// Spawned, when not nil, is called once with the process group id of
	// an exec's command, right after it is created and before it can
	// produce output. When Exec returns, the group is dead (or the outcome
	// is outcome_unknown). The executor records groups so that a restarted
	// executor can kill what a crashed one left running.
	Spawned func(pgid int)
	// Staged, when not nil, is called with the real path and identity
	// (device, inode) of each staging file a write creates beside its
	// target (§3.4), right after it is created; the func it returns (nil
	// for none) is called once the file is gone: renamed into place or
	// removed. The executor records staging files so that a restarted
	// executor can remove what a crashed one left half-written.
	Staged func(path string, dev, ino uint64) (gone func())
}

// fail builds a Failure. Messages are shown to the model and travel as JSON
// strings, so invalid UTF-8 (a name the OS handed us) is replaced: the wire
// cannot carry it and a message that cannot be encoded is worse than a lossy
// one. Paths in messages are formatted with %q, which escapes such bytes.
func failf(code protocol.ErrorCode, format string, args ...any) protocol.Failure {
	return protocol.Failure{ErrorCode: code, Message: strings.ToValidUTF8(fmt.Sprintf(format, args...), "\uFFFD")}
}
