package device

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// The two retry policies of registration. An answer of the lane is a
// refusal and follows §1.1: 429 waits retry-after exactly, never under a
// second, and at most MaxEnrollAttempts answers are asked for. No answer
// at all (connection refused, DNS, TLS, a timeout, a connection cut before
// the answer) is a network error: retried with backoff from 1 s to
// maxUnreachableWait for at most MaxUnreachableRetry from the first of a
// run of them, then UnreachableError.
const (
	MaxEnrollAttempts   = 10
	MaxUnreachableRetry = 60 * time.Second
	minRetryWait        = time.Second
	maxUnreachableWait  = 10 * time.Second
	// defaultAttemptTimeout bounds one request (always within what is
	// left of MaxUnreachableRetry): an unanswered connect otherwise waits
	// for the kernel's SYN retries, minutes.
	defaultAttemptTimeout = 15 * time.Second
)

// attemptKind is how one POST ended.
type attemptKind int

const (
	final       attemptKind = iota // 200, or an answer not to retry
	rateLimited                    // 429: wait retry-after
	unavailable                    // 502, 503, 504: wait retry-after or back off
	unreachable                    // no answer: a network error
)

// attempt is the result of one POST.
type attempt struct {
	kind     attemptKind
	deviceID string
	err      error
	wait     time.Duration // rateLimited, unavailable: retry-after; -1 when absent
	// mayHaveLanded: the request left this machine and no answer proved it
	// was not registered (no answer at all, or a 5xx). The key may then be
	// registered under the token, so it must be kept for a replay (§1.1).
	mayHaveLanded bool
}

// register posts the body until an answer is final, the answers reach the
// cap, or the lane stays unreachable past the budget. landed reports
// whether any attempt may have registered the key. Nothing here logs the
// body: it carries the token.
func register(ctx context.Context, o EnrollOptions, base string, body []byte) (deviceID string, landed bool, err error) {
	endpoint := base + "/v1/devices/enroll"
	var (
		answers   int       // answered attempts (the §1.1 cap)
		downSince time.Time // the start of the current run of network errors
		downTries int
	)
	for {
		started := o.Now()
		timeout := o.AttemptTimeout
		if !downSince.IsZero() {
			timeout = min(timeout, o.UnreachableRetry-started.Sub(downSince))
		}
		a := registerOnce(ctx, o, endpoint, body, timeout)
		landed = landed || a.mayHaveLanded
		if a.kind == final {
			return a.deviceID, landed, a.err
		}
		var wait time.Duration
		if a.kind == unreachable {
			if downSince.IsZero() {
				downSince = started
			}
			downTries++
			wait = min(minRetryWait<<min(downTries-1, 4), maxUnreachableWait)
			if down := o.Now().Sub(downSince); down+wait >= o.UnreachableRetry {
				return "", landed, newUnreachableError(base, a.err, timeout, downTries, down)
			}
		} else {
			downSince, downTries = time.Time{}, 0
			answers++
			if answers >= MaxEnrollAttempts {
				return "", landed, capError(answers, a)
			}
			wait = a.wait
			if wait < 0 { // no retry-after: exponential from 1 s
				wait = minRetryWait << min(answers-1, 5)
			}
			wait = max(wait, minRetryWait)
		}
		o.Logger.Warn("enrollment not answered yet; retrying", "wait", wait.String(), "err", a.err)
		if err := o.Sleep(ctx, wait); err != nil {
			return "", landed, fmt.Errorf("enrollment interrupted: %w (last: %v)", err, a.err)
		}
	}
}

// capError is the end of MaxEnrollAttempts answers that were all refusals
// to retry later.
func capError(n int, last attempt) error {
	if last.kind == rateLimited {
		// §1.1: "ten failures in a minute mean the token or the
		// credential is wrong, not that the network is slow".
		return fmt.Errorf("gave up after %d attempts (ten refusals in a row mean the token or the credential is wrong, not that the network is slow): %w", n, last.err)
	}
	return fmt.Errorf("gave up after %d attempts: the lane is not serving enrollments now (try again later): %w", n, last.err)
}

// registerOnce makes one attempt, bounded by timeout.
func registerOnce(ctx context.Context, o EnrollOptions, endpoint string, body []byte, timeout time.Duration) attempt {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var sent atomic.Bool // bytes of the request left this machine
	actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }})
	req, err := http.NewRequestWithContext(actx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return attempt{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+o.APIKey)
	noAnswer := func(err error, landed bool) attempt {
		if ctx.Err() != nil {
			return attempt{err: fmt.Errorf("enrollment interrupted: %w", context.Cause(ctx)), mayHaveLanded: landed}
		}
		return attempt{kind: unreachable, err: err, mayHaveLanded: landed}
	}
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return noAnswer(err, sent.Load())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return noAnswer(fmt.Errorf("reading the lane's answer: %w", err), true)
	}
	return answered(resp, b)
}

// answered maps one answer of the lane (§1.1, "What POST
// /v1/devices/enroll answers").
func answered(resp *http.Response, b []byte) attempt {
	var ans struct {
		DeviceID  string `json:"deviceId"`
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	}
	json.Unmarshal(b, &ans) // a non-JSON body leaves the fields empty
	apiErr := &APIError{resp.StatusCode, ans.ErrorCode, ans.Message}
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		if !strings.HasPrefix(ans.DeviceID, "dev_") || !protocol.ValidULID(strings.TrimPrefix(ans.DeviceID, "dev_")) {
			return attempt{err: fmt.Errorf("the lane answered 200 without a valid deviceId"), mayHaveLanded: true}
		}
		return attempt{deviceID: ans.DeviceID}
	case code == http.StatusForbidden && ans.ErrorCode == "device.enrollment_invalid":
		return attempt{err: &EnrollmentInvalidError{}}
	case code == http.StatusTooManyRequests:
		// Refused before the token is consumed (§1.1).
		return attempt{kind: rateLimited, err: apiErr, wait: retryAfter(resp.Header.Get("Retry-After"), minRetryWait)}
	case code == http.StatusBadGateway, code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return attempt{kind: unavailable, err: apiErr, wait: retryAfter(resp.Header.Get("Retry-After"), -1), mayHaveLanded: true}
	case code == http.StatusBadRequest && bytes.Contains(b, []byte("HTTP request to an HTTPS server")):
		return attempt{err: fmt.Errorf("the lane speaks https: use https:// in --server")}
	}
	return attempt{err: apiErr, mayHaveLanded: resp.StatusCode >= 500}
}

// retryAfter reads a retry-after of whole seconds; def when absent or
// unreadable.
func retryAfter(h string, def time.Duration) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64)
	if err != nil || n < 0 || n > 24*3600 {
		return def
	}
	return time.Duration(n) * time.Second
}
