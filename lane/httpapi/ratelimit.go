package httpapi

import (
	"sync"
	"time"
)

// §1.1: both enrollment endpoints are limited to 10 requests per 60 s fixed
// window per caller identity, counted separately, per replica. This is a
// fixed property of the lane, not an operator knob.
const (
	enrollRateLimit  = 10
	enrollRateWindow = 60 * time.Second
)

// bucket names a separately counted endpoint.
type bucket string

const (
	bucketIssue    bucket = "issue"
	bucketRegister bucket = "register"
)

// rateLimiter decides whether a caller may make one more request. An error
// means the limiter could not decide; callers refuse (fail closed).
type rateLimiter interface {
	allow(identity string, b bucket) (ok bool, retryAfter time.Duration, err error)
}

// fixedWindow counts requests per (identity, bucket) in windows aligned to
// multiples of the window length.
type fixedWindow struct {
	now    func() time.Time
	limit  int
	window time.Duration

	mu        sync.Mutex
	counts    map[windowKey]int
	lastSweep int64 // the window index of the last sweep
}

type windowKey struct {
	identity string
	bucket   bucket
	index    int64 // which window
}

func newFixedWindow(now func() time.Time, limit int, window time.Duration) *fixedWindow {
	return &fixedWindow{now: now, limit: limit, window: window, counts: map[windowKey]int{}}
}

func (f *fixedWindow) allow(identity string, b bucket) (bool, time.Duration, error) {
	now := f.now()
	index := now.UnixNano() / int64(f.window)
	f.mu.Lock()
	defer f.mu.Unlock()
	if index != f.lastSweep {
		// A new window: the counts of older ones are of no further use.
		for k := range f.counts {
			if k.index < index {
				delete(f.counts, k)
			}
		}
		f.lastSweep = index
	}
	k := windowKey{identity, b, index}
	if f.counts[k] >= f.limit {
		end := time.Unix(0, (index+1)*int64(f.window))
		return false, end.Sub(now), nil
	}
	f.counts[k]++
	return true, 0, nil
}

// retryAfterSeconds is the retry-after header value: whole seconds, rounded
// up, at least 1 (§1.1).
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
