package executor

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sema-agent/sema/executor/journal"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/protocol"
)

// Config configures a Runtime. Zero values take the defaults below.
type Config struct {
	DeviceID      string             // dev_<ULID>, from the device record
	Key           ed25519.PrivateKey // signs the hello, nothing else (§6.4)
	Server        string             // the lane's base URL, http(s)://…
	WorkspaceRoot string             // the enrolled root, sent in hello
	// Ops is the ops' environment; its WorkspaceRoot defaults to
	// WorkspaceRoot. It must not change while the runtime runs.
	//
	// Containment is on by default (§6.6, docs/executor.md): without
	// Ops.AllowedRoots, file instructions and exec's working directory are
	// contained to WorkspaceRoot and Ops.TempDir (default os.TempDir());
	// AllowedRoots {"/"} serves every path. StatusPath, ProcDir and StagingDir are
	// added to Ops.NeverServe: the executor's own files are never served.
	Ops ops.Env

	HTTPClient *http.Client // capabilities and the WebSocket dial
	Clock      Clock        // default the system clock
	Logger     *slog.Logger // default slog.Default(); never given content
	StatusPath string       // where to write the status file; "" for none
	// ProcDir records the process groups of running commands (orphans.go);
	// "" means a "procs" directory beside StatusPath, or none without it.
	ProcDir string
	// StagingDir records the staging files of writes in progress
	// (staging.go); "" means a "staging" directory beside StatusPath, or
	// none without it.
	StagingDir      string
	ExecutorVersion string // hello.platform.executorVersion

	// Outbox bounds (R5–R8). The lane's reorder buffer holds 64 entries /
	// 2 MiB per instruction; the defaults stay at half of that.
	MaxUnackedChunks int           // per instruction; default 32
	MaxUnackedBytes  int64         // per instruction; default 1 MiB
	MaxOutboxBytes   int64         // all instructions; default 8 MiB
	MaxResultSends   int           // sockets a result is written to before it is given up; default 5
	ResultGiveUp     time.Duration // an unacked result is given up this long after its first send; default 10 min

	// Reconnect backoff (§1.4): jittered exponential, default 1 s → 60 s.
	MinBackoff, MaxBackoff time.Duration

	// ShutdownGrace is how long in-flight work may finish after goodbye
	// before it is stopped (default 10 s); FlushTimeout how long the last
	// results may wait for their acks after that (default 5 s).
	ShutdownGrace, FlushTimeout time.Duration
	// FenceWait bounds the wait for fenced work to end; past it the
	// socket is dropped without generationAck and the fence is retried on
	// the next one (default 30 s).
	FenceWait time.Duration
	// CancelAnswerBudget: a cancelled instruction whose op has not answered
	// by then is answered outcome_unknown (R11's budget is 10 s; default 9 s).
	CancelAnswerBudget time.Duration
	// TimeoutBackstop: an instruction whose op has not answered by
	// timeoutMs + this is stopped and answered outcome_unknown (R12: the
	// lane gives up at timeoutMs + 30 s; default 20 s).
	TimeoutBackstop time.Duration

	// Gate, when set, is asked before each op starts and may answer the
	// instruction instead of running it (gate.go; executor/approve).
	Gate Gate

	// Journal, when set, gets a record when each op is about to begin and
	// one when each result is produced (journal_hooks.go); the caller opens
	// and closes it. JournalDigestCommands records an exec's command as its
	// digest rather than its text.
	Journal               *journal.Journal
	JournalDigestCommands bool

	// Jitter returns a number in [0, 1) for the backoff; default math/rand.
	Jitter func() float64
}

func (c Config) withDefaults() (Config, error) {
	if c.DeviceID == "" {
		return c, errors.New("executor: Config.DeviceID is required")
	}
	if len(c.Key) != ed25519.PrivateKeySize {
		return c, errors.New("executor: Config.Key must be an Ed25519 private key")
	}
	if c.Server == "" {
		return c, errors.New("executor: Config.Server is required")
	}
	if c.WorkspaceRoot == "" {
		return c, errors.New("executor: Config.WorkspaceRoot is required")
	}
	if c.Ops.WorkspaceRoot == "" {
		c.Ops.WorkspaceRoot = c.WorkspaceRoot
	}
	if c.ProcDir == "" && c.StatusPath != "" {
		c.ProcDir = filepath.Join(filepath.Dir(c.StatusPath), "procs")
	}
	if c.StagingDir == "" && c.StatusPath != "" {
		c.StagingDir = filepath.Join(filepath.Dir(c.StatusPath), "staging")
	}
	c.Ops = containedByDefault(c.Ops, c.StatusPath, c.ProcDir, c.StagingDir)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ExecutorVersion == "" {
		c.ExecutorVersion = "dev"
	}
	setDefault(&c.MaxUnackedChunks, protocol.ReorderBufferEntries/2)
	setDefault(&c.MaxUnackedBytes, protocol.ReorderBufferBytes/2)
	setDefault(&c.MaxOutboxBytes, 8<<20)
	setDefault(&c.MaxResultSends, 5)
	setDefault(&c.ResultGiveUp, 10*time.Minute)
	setDefault(&c.MinBackoff, time.Second)
	setDefault(&c.MaxBackoff, 60*time.Second)
	setDefault(&c.ShutdownGrace, 10*time.Second)
	setDefault(&c.FlushTimeout, 5*time.Second)
	setDefault(&c.FenceWait, 30*time.Second)
	setDefault(&c.CancelAnswerBudget, 9*time.Second)
	setDefault(&c.TimeoutBackstop, 20*time.Second)
	if c.MaxUnackedChunks > protocol.ReorderBufferEntries || c.MaxUnackedBytes > protocol.ReorderBufferBytes {
		return c, fmt.Errorf("executor: the per-instruction outbox bound must stay within the lane's reorder buffer (%d entries, %d bytes)",
			protocol.ReorderBufferEntries, protocol.ReorderBufferBytes)
	}
	if c.MaxBackoff < c.MinBackoff {
		return c, errors.New("executor: MaxBackoff is below MinBackoff")
	}
	return c, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// The runtime's terminal ends (§1.4, R13). Run returns one of them, or nil
// after a graceful shutdown; every other trouble is retried.
var (
	// ErrRevoked: the lane revoked this device. Terminal: delete the key,
	// re-enroll (a new deviceId).
	ErrRevoked = errors.New("this device has been revoked by the lane; enroll again to get a new device id")
	// ErrSuperseded: another connection took this device's lease, so
	// another executor instance is live. Do not race it.
	ErrSuperseded = errors.New("another executor took this device's connection (bye superseded); " +
		"only one executor may serve a device: stop the other one, or check the single-instance lock on this machine")
)

// UpgradeRequiredError is helloReject protocol_version_unsupported: this
// executor's protocol version is outside the lane's range. Never retried
// with another version (§1.4).
type UpgradeRequiredError struct {
	Ours int
	Min  *int // the lane's minProtocolVersion, when it said
}

func (e *UpgradeRequiredError) Error() string {
	if e.Min != nil {
		return fmt.Sprintf("the lane does not speak protocol version %d (it needs at least %d): upgrade sema", e.Ours, *e.Min)
	}
	return fmt.Sprintf("the lane does not speak protocol version %d: upgrade sema", e.Ours)
}

// containedByDefault is env with the executor's containment defaults: the
// workspace root and the temporary kinds' directory when no roots are set,
// and the executor's own files never served. env's slices are not changed.
func containedByDefault(env ops.Env, own ...string) ops.Env {
	if len(env.AllowedRoots) == 0 {
		tmp := env.TempDir
		if tmp == "" {
			tmp = os.TempDir()
		}
		env.AllowedRoots = []string{env.WorkspaceRoot, tmp}
	}
	never := slices.Clone(env.NeverServe)
	for _, p := range own {
		if p != "" {
			never = append(never, p)
		}
	}
	env.NeverServe = never
	return env
}
