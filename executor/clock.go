package executor

import "time"

// Clock is the runtime's time source: the heartbeat, the backoff, the
// handshake deadline and the answer backstops all go through it, so tests
// drive them with a fake clock instead of sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer fires once on C after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d; C of the result is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable one-shot timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
}

// SystemClock is the real clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (SystemClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
