package httpapi

import (
	"io"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/lanetest"
)

func TestRetryAfterIsWholeSecondsAtLeastOne(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int64
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + time.Millisecond, 2}, {59*time.Second + 999*time.Millisecond, 60}} {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

type failingLimiter struct{}

func (failingLimiter) allow(string, bucket) (bool, time.Duration, error) {
	return true, 0, io.ErrUnexpectedEOF
}

// §1.1: "a rate limiter that fails open is exactly what token guessing wants".
func TestRateLimiterFailsClosed(t *testing.T) {
	l := newTestLane(t)
	l.limiter = failingLimiter{}
	_, key := l.user("alice")
	r := l.do("POST", "/v1/devices/enroll-tokens", key, "")
	lanetest.WantError(t, r, 429, "limit.rate_exceeded", "")
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("retry-after %q, want 1", r.Header.Get("Retry-After"))
	}
}
