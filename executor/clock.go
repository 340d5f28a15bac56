package executor

import "github.com/sema-agent/sema/internal/clock"

// Clock is the runtime's time source (Config.Clock): the heartbeat, the
// backoff, the handshake deadline, the graces and the answer backstops all
// go through it, so tests drive them with a fake clock instead of sleeping.
// It is the module's one clock interface, named here so callers outside
// the module can implement it.
type Clock = clock.Clock

// Timer is a Clock's one-shot timer.
type Timer = clock.Timer
