package lane

import (
	"fmt"
	"log/slog"
	"time"

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
	// Now is the clock of the enrollment rate limiter; default time.Now.
	// Expiries are the database's, not this clock's.
	Now func() time.Time
	// Logger receives structured logs; default slog.Default(). Tokens, keys
	// and content are never logged.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, fmt.Errorf("lane: Config.Store is required")
	}
	if c.WSPath == "" {
		c.WSPath = protocol.WSPath
	}
	if c.TokenTTL == 0 {
		c.TokenTTL = protocol.DefaultTokenTTL
	}
	if c.TokenTTL < time.Second {
		return c, fmt.Errorf("lane: TokenTTL %v is under a second", c.TokenTTL)
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = protocol.DefaultMaxInflight
	}
	if c.MaxInflight < 1 {
		return c, fmt.Errorf("lane: MaxInflight %d must be at least 1", c.MaxInflight)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
