package httpapi

import (
	"io"
	"strings"
	"testing"
	"time"
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
	a := newTestAPI(t)
	a.limiter = failingLimiter{}
	_, key := a.user("alice")
	resp, body := a.do("POST", "/v1/devices/enroll-tokens", key, "")
	if resp.StatusCode != 429 || !strings.Contains(string(body), `"limit.rate_exceeded"`) {
		t.Fatalf("%d %s, want 429 limit.rate_exceeded", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("retry-after %q, want 1", resp.Header.Get("Retry-After"))
	}
}
