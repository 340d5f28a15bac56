package nexting

import "github.com/sema-agent/sema/internal/clock"

// Clock is the time source of the drivers (SessionConfig.Clock, ServeSim):
// the module's one clock interface, named here so that code outside the
// module can implement it — a device's firmware simulator, a test's fake.
// The state machines themselves take now as an argument and need none.
type Clock = clock.Clock

// Timer is a Clock's one-shot timer.
type Timer = clock.Timer
