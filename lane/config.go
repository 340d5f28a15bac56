package lane

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Config configures a lane Server. Zero values take the spec's defaults.
type Config struct {
	// Store is the registry. Required.
	Store store.Store
	// Disabled turns the device lane off: capabilities say
	// "deviceExecutor": false and the lane's endpoints answer 501.
	Disabled bool
	// WSPath is the WebSocket upgrade path; default protocol.WSPath.
	WSPath string
	// TokenTTL is an enrollment token's lifetime; default 900 s (§1.1).
	TokenTTL time.Duration
	// MaxInflight is the per-device in-flight bound; default 4 (§1.5).
	MaxInflight int
	// Clock is the lane's one clock: the WebSocket lane's timers and the
	// enrollment rate limit run on it; default the system clock. Expiries
	// in the registry are the database's, not this clock's.
	Clock clock.Clock

	// The WebSocket lane's timings and bounds, each defaulting to the value
	// the spec names.
	HeartbeatInterval time.Duration // helloAck.heartbeatIntervalMs; 15 s (§1.5)
	LeaseTTL          time.Duration // the stored connection lease; 45 s (§1.4)
	ReconnectGrace    time.Duration // books close after a drop; 120 s (R4)
	GapTimeout        time.Duration // a stream gap fails the instruction; 30 s (R8)
	CancelGrace       time.Duration // a cancel demands a terminal; 10 s (R11)
	ExecutionGrace    time.Duration // added to timeoutMs as the backstop; 30 s (R12)
	HandshakeDeadline time.Duration // socket open to helloAck; 5 s (§1.2)
	ReorderEntries    int           // reorder buffer entries; 64 (§4)
	ReorderBytes      int           // reorder buffer decoded bytes; 2 MiB (§4)
	DeliveryEntries   int           // a Call's undelivered chunks; 8192 (§4)
	DeliveryBytes     int           // a Call's undelivered bytes; 2 MiB (§4)
	PayloadPartBytes  int           // payload down-chunk size; 256 KiB (§2.1)
	SettledMemo       int           // recently settled instructions kept; 512 (§2.4)
	// MaxPreAuth and MaxPreAuthPerAddr cap sockets that have not finished
	// the handshake, in total and per remote address; beyond them the
	// upgrade answers 503 (§1.2). Defaults 1024 and 16.
	MaxPreAuth        int
	MaxPreAuthPerAddr int
	// WriteTimeout bounds one frame write; a socket that cannot take a frame
	// in that time is closed. Default 30 s.
	WriteTimeout time.Duration
	// AuditRetention is how long audit rows are kept, by the database
	// clock; older ones are pruned at start and every hour. Default 720 h.
	AuditRetention time.Duration
	// AuditKeep names events whose rows are never pruned (sema server keeps
	// the record of its first start).
	AuditKeep []string
	// HistoryRetention is how long instruction history rows are kept
	// after they settled, by the database clock; older ones are pruned at
	// start and every hour. Default 90 days.
	HistoryRetention time.Duration
	// HistoryCommands is what a history row keeps of an exec's command:
	// HistoryCommandsFull, its text (the default), or
	// HistoryCommandsDigest, its SHA-256 and length only.
	HistoryCommands string
	// AdvertiseURL is where the other replicas on the same registry reach
	// this one (docs/operations.md): an absolute http or https URL. When
	// set, New records the replica in the registry, each lease renewal
	// round beats its heartbeat, and Shutdown marks it draining, then
	// removes it. "" records no replica row (one replica alone, as on
	// SQLite).
	AdvertiseURL string
	// Logger receives structured logs; default slog.Default(). Tokens, keys
	// and content are never logged.
	Logger *slog.Logger
	// MaxBufferedContent bounds, server-wide, the bytes of instruction
	// bodies and write content the HTTP API holds in memory at once; a
	// request over it is 503 service.busy (package httpapi). Default
	// 256 MiB; at least 1 MiB. Content given to Dispatch by a Go caller is
	// the caller's memory and is not counted.
	MaxBufferedContent int64
	// MaxBufferedContentPerIdentity bounds what one identity's requests
	// hold of MaxBufferedContent, so that no caller can take it all and
	// leave the others 503. Default a quarter of MaxBufferedContent; at
	// most all of it.
	MaxBufferedContentPerIdentity int64
	// BodyIdleTimeout: a request body that stops arriving for this long is
	// dropped, and what it held of the budget freed. Default 10 s.
	BodyIdleTimeout time.Duration
	// BodyMinRate is the slowest a request body may arrive on average, in
	// bytes per second, after a first BodyIdleTimeout: a body of n bytes
	// must be in within BodyIdleTimeout + n/BodyMinRate. Default 64 KiB/s.
	BodyMinRate int64
	// MaxTimeout bounds an instruction's timeoutMs; a longer one is
	// refused (400 naming the bound). Default 24 h.
	MaxTimeout time.Duration
	// MCPAllowedOrigins are the browser origins (scheme://host[:port]) the
	// MCP endpoint answers; a request whose Origin is present and not one
	// of them is refused 403 before any of it is read (the MCP transport's
	// rule against DNS rebinding). None by default: clients that are not
	// browsers send no Origin.
	MCPAllowedOrigins []string
	// DrainGrace is how long work in flight may finish once Shutdown has
	// begun (SIGTERM), before what is left is written off. Default 5 s;
	// negative: none, what is in flight is written off at once.
	DrainGrace time.Duration
	// MaxAPIKeysPerIdentity bounds the keys one identity holds that are
	// not revoked; one more is refused (409 naming the bound). Default 100.
	MaxAPIKeysPerIdentity int
	// MaxSessionsPerIdentity bounds the root session bindings (§9) one
	// identity holds; an instruction or rebind that would bind one more
	// is refused (409 naming the bound). Default 10,000.
	MaxSessionsPerIdentity int
	// SessionIdleExpiry is how long a root session binding is kept unused
	// (its use is recorded at most once an hour); older ones are pruned
	// every hour. Default 720 h.
	SessionIdleExpiry time.Duration
}

// What a history row keeps of an exec's command (Config.HistoryCommands).
const (
	HistoryCommandsFull   = "full"
	HistoryCommandsDigest = "digest"
)

// DefaultConfig is the one place the lane's defaults live: every timing
// and bound the spec names, at the spec's value, and the lane's own. New
// fills each zero field of a Config from it; `sema server`'s flags show
// it. It has no Store, Logger or Clock (New defaults the last two to
// slog.Default() and the system clock).
func DefaultConfig() Config {
	return Config{
		WSPath:             protocol.WSPath,
		TokenTTL:           protocol.DefaultTokenTTL,
		MaxInflight:        protocol.DefaultMaxInflight,
		HeartbeatInterval:  protocol.DefaultHeartbeatInterval,
		LeaseTTL:           protocol.DefaultLeaseTTL,
		ReconnectGrace:     protocol.DefaultReconnectGrace,
		GapTimeout:         protocol.DefaultGapTimeout,
		CancelGrace:        protocol.DefaultCancelGrace,
		ExecutionGrace:     protocol.DefaultExecutionGrace,
		HandshakeDeadline:  protocol.HandshakeDeadline,
		ReorderEntries:     protocol.ReorderBufferEntries,
		ReorderBytes:       protocol.ReorderBufferBytes,
		DeliveryEntries:    8192,
		DeliveryBytes:      2 << 20,
		PayloadPartBytes:   protocol.DefaultPayloadPartBytes,
		SettledMemo:        protocol.SettledMemoSize,
		MaxPreAuth:         1024,
		MaxPreAuthPerAddr:  16,
		WriteTimeout:       30 * time.Second,
		AuditRetention:     720 * time.Hour,
		HistoryRetention:   90 * 24 * time.Hour,
		HistoryCommands:    HistoryCommandsFull,
		MaxBufferedContent: 256 << 20,
		BodyIdleTimeout:    10 * time.Second,
		BodyMinRate:        64 << 10,
		MaxTimeout:         24 * time.Hour,

		MaxAPIKeysPerIdentity:  100,
		MaxSessionsPerIdentity: 10_000,
		SessionIdleExpiry:      720 * time.Hour,
		DrainGrace:             5 * time.Second,
	}
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, fmt.Errorf("lane: Config.Store is required")
	}
	def := DefaultConfig()
	if c.WSPath == "" {
		c.WSPath = def.WSPath
	}
	if c.TokenTTL == 0 {
		c.TokenTTL = def.TokenTTL
	}
	if c.TokenTTL < time.Second {
		return c, fmt.Errorf("lane: TokenTTL %v is under a second", c.TokenTTL)
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = def.MaxInflight
	}
	if c.MaxInflight < 1 {
		return c, fmt.Errorf("lane: MaxInflight %d must be at least 1", c.MaxInflight)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	durations := []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.HeartbeatInterval, def.HeartbeatInterval},
		{&c.LeaseTTL, def.LeaseTTL},
		{&c.ReconnectGrace, def.ReconnectGrace},
		{&c.GapTimeout, def.GapTimeout},
		{&c.CancelGrace, def.CancelGrace},
		{&c.ExecutionGrace, def.ExecutionGrace},
		{&c.HandshakeDeadline, def.HandshakeDeadline},
		{&c.WriteTimeout, def.WriteTimeout},
		{&c.AuditRetention, def.AuditRetention},
		{&c.SessionIdleExpiry, def.SessionIdleExpiry},
		{&c.HistoryRetention, def.HistoryRetention},
	}
	for _, d := range durations {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return c, fmt.Errorf("lane: a negative duration in Config (%v)", *d.v)
		}
	}
	ints := []struct {
		v   *int
		def int
	}{
		{&c.ReorderEntries, def.ReorderEntries},
		{&c.ReorderBytes, def.ReorderBytes},
		{&c.DeliveryEntries, def.DeliveryEntries},
		{&c.DeliveryBytes, def.DeliveryBytes},
		{&c.PayloadPartBytes, def.PayloadPartBytes},
		{&c.SettledMemo, def.SettledMemo},
		{&c.MaxPreAuth, def.MaxPreAuth},
		{&c.MaxPreAuthPerAddr, def.MaxPreAuthPerAddr},
		{&c.MaxAPIKeysPerIdentity, def.MaxAPIKeysPerIdentity},
		{&c.MaxSessionsPerIdentity, def.MaxSessionsPerIdentity},
	}
	for _, n := range ints {
		if *n.v == 0 {
			*n.v = n.def
		}
		if *n.v < 1 {
			return c, fmt.Errorf("lane: a Config bound below 1 (%d)", *n.v)
		}
	}
	// A payload part must fit a 1 MiB frame once base64-encoded.
	if c.PayloadPartBytes > 700<<10 {
		return c, fmt.Errorf("lane: PayloadPartBytes %d does not fit a 1 MiB frame", c.PayloadPartBytes)
	}
	switch c.HistoryCommands {
	case "":
		c.HistoryCommands = def.HistoryCommands
	case HistoryCommandsFull, HistoryCommandsDigest:
	default:
		return c, fmt.Errorf("lane: HistoryCommands %q is neither %q nor %q", c.HistoryCommands, HistoryCommandsFull, HistoryCommandsDigest)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := CheckAdvertiseURL(c.AdvertiseURL); err != nil {
		return c, err
	}
	if c.MaxBufferedContent == 0 {
		c.MaxBufferedContent = def.MaxBufferedContent
	}
	// The HTTP API reads a body without Content-Length up to one frame.
	if c.MaxBufferedContent < protocol.MaxFrameBytes {
		return c, fmt.Errorf("lane: MaxBufferedContent %d is under %d bytes (one body without Content-Length)", c.MaxBufferedContent, protocol.MaxFrameBytes)
	}
	if c.MaxBufferedContentPerIdentity == 0 {
		c.MaxBufferedContentPerIdentity = max(c.MaxBufferedContent/4, protocol.MaxFrameBytes)
	}
	if c.MaxBufferedContentPerIdentity < protocol.MaxFrameBytes || c.MaxBufferedContentPerIdentity > c.MaxBufferedContent {
		return c, fmt.Errorf("lane: MaxBufferedContentPerIdentity %d must be between %d bytes (one body without Content-Length) and MaxBufferedContent (%d)",
			c.MaxBufferedContentPerIdentity, protocol.MaxFrameBytes, c.MaxBufferedContent)
	}
	if c.BodyIdleTimeout == 0 {
		c.BodyIdleTimeout = def.BodyIdleTimeout
	}
	if c.DrainGrace == 0 {
		c.DrainGrace = def.DrainGrace
	}
	if c.BodyMinRate == 0 {
		c.BodyMinRate = def.BodyMinRate
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = def.MaxTimeout
	}
	if c.BodyIdleTimeout < 0 || c.BodyMinRate < 1 || c.MaxTimeout < time.Second {
		return c, fmt.Errorf("lane: BodyIdleTimeout %v, BodyMinRate %d and MaxTimeout %v must be positive (MaxTimeout at least a second)",
			c.BodyIdleTimeout, c.BodyMinRate, c.MaxTimeout)
	}
	return c, nil
}
