package executor

import (
	"math/rand/v2"
	"time"
)

// backoff is the reconnect policy of §1.4 and §7: exponential from Min to
// Max, jittered so a fleet that lost one replica does not come back in step.
// Attempt n (from 0) waits a uniform random time in [c/2, c], c =
// min(Max, Min·2ⁿ), and never less than Min.
type backoff struct {
	min, max time.Duration
	rand     func() float64 // in [0, 1)
	n        int
}

func (b *backoff) next() time.Duration {
	c := b.max
	if b.n < 30 {
		c = min(b.max, b.min<<b.n)
	}
	b.n++
	r := rand.Float64
	if b.rand != nil {
		r = b.rand
	}
	d := c/2 + time.Duration(r()*float64(c/2))
	return max(d, b.min)
}

func (b *backoff) reset() { b.n = 0 }
