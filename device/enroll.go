package device

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// Enrollment retry policy (§1.1, §7): honour retry-after exactly, never
// faster than once per second, at most ten attempts.
const (
	MaxEnrollAttempts = 10
	minRetryWait      = time.Second
)

// EnrollmentInvalidText is the single explanation of 403
// device.enrollment_invalid: the four refusals behind it are deliberately
// indistinguishable on the wire (§1.1), so it says all of them.
const EnrollmentInvalidText = "Enrollment was refused. The token may have expired, may already have been used " +
	"by another device, or may have been issued to a different account. Ask for a new enrollment token and try again."

// EnrollmentInvalidError is the lane's 403 device.enrollment_invalid. It is
// final: the same token must not be retried.
type EnrollmentInvalidError struct{}

func (*EnrollmentInvalidError) Error() string { return EnrollmentInvalidText }

// APIError is any other refusal of the management plane.
type APIError struct {
	Status  int
	Code    string // errorCode, when the body carried one
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the lane answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("the lane answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Sleeper waits d or until ctx ends. Tests inject one that records d.
type Sleeper func(ctx context.Context, d time.Duration) error

// Sleep is the real Sleeper.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// enrollBody is the closed body of POST /v1/devices/enroll (§1.1).
type enrollBody struct {
	Token         string `json:"token"`
	Pubkey        string `json:"pubkey"`
	PlatformOS    string `json:"platformOs"`
	PlatformArch  string `json:"platformArch,omitempty"`
	DisplayName   string `json:"displayName,omitempty"`
	WorkspaceRoot string `json:"workspaceRoot"`
}

// EnrollOptions is one `sema device enroll`.
type EnrollOptions struct {
	Server        string // the lane's base URL
	Token         string // the one-shot enrollment token; never logged or stored
	APIKey        string // the user's credential, sent as Authorization: Bearer
	WorkspaceRoot string // an existing directory; made absolute
	DisplayName   string
	StateDir      string

	HTTPClient *http.Client // default http.DefaultClient
	Sleep      Sleeper      // default Sleep
	Now        func() time.Time
	Logger     *slog.Logger
	GOOS       string // default runtime.GOOS; only darwin and linux enroll
	GOARCH     string // default runtime.GOARCH
}

// Enroll registers this machine as a device (§1.1): it generates the key
// pair here (or reuses the key of an enrollment that was interrupted before
// its answer arrived, so a retry with the same token is a safe replay),
// posts the closed body with the user's credential, and stores the device
// record beside the key. It refuses a state dir that already holds a live
// enrollment.
func Enroll(ctx context.Context, o EnrollOptions) (Record, error) {
	o.defaults()
	var rec Record
	if !protocol.PlatformOS(o.GOOS).Valid() {
		return rec, fmt.Errorf("this executor runs on darwin and linux only; %s is not supported by the device lane", o.GOOS)
	}
	base, err := ServerURL(o.Server)
	if err != nil {
		return rec, err
	}
	if o.Token == "" {
		return rec, errors.New("an enrollment token is required (--token)")
	}
	if o.APIKey == "" {
		return rec, errors.New("the user's API key is required: set SEMA_API_KEY")
	}
	ws, err := workspaceDir(o.WorkspaceRoot)
	if err != nil {
		return rec, err
	}
	if err := EnsureStateDir(o.StateDir); err != nil {
		return rec, err
	}
	if old, err := LoadRecord(o.StateDir); err == nil && old.RevokedAt == nil {
		return rec, fmt.Errorf("the state dir %s is already enrolled as device %s; use another --state-dir to enroll another device", o.StateDir, old.DeviceID)
	} else if err != nil && !errors.Is(err, ErrNotEnrolled) {
		return rec, err
	}

	priv, err := pendingKey(o.StateDir)
	if err != nil {
		return rec, err
	}
	body, err := json.Marshal(enrollBody{
		Token:         o.Token,
		Pubkey:        base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)),
		PlatformOS:    o.GOOS,
		PlatformArch:  o.GOARCH,
		DisplayName:   o.DisplayName,
		WorkspaceRoot: ws,
	})
	if err != nil {
		return rec, err
	}
	deviceID, err := register(ctx, o, base+"/v1/devices/enroll", body)
	var invalid *EnrollmentInvalidError
	if errors.As(err, &invalid) {
		// The key is not registered under this token; a new token gets a
		// new key.
		RemoveKey(o.StateDir)
	}
	if err != nil {
		return rec, err
	}
	rec = Record{DeviceID: deviceID, Server: base, WorkspaceRoot: ws, DisplayName: o.DisplayName, EnrolledAt: o.Now().UTC()}
	if err := WriteRecord(o.StateDir, rec); err != nil {
		return rec, fmt.Errorf("enrolled as %s, but the record could not be stored (run enroll again with the same token to recover): %w", deviceID, err)
	}
	o.Logger.Info("device enrolled", "deviceId", deviceID, "server", base, "stateDir", o.StateDir)
	return rec, nil
}

func (o *EnrollOptions) defaults() {
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.Sleep == nil {
		o.Sleep = Sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.GOARCH == "" {
		o.GOARCH = runtime.GOARCH
	}
}

// ServerURL checks and normalizes the lane's base URL: http or https, a
// host, no query or fragment, no trailing slash.
func ServerURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--server must be an http:// or https:// URL of the lane, like https://lane.example.com (got %q)", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// workspaceDir makes the workspace root absolute and checks that it is a
// directory: it is the resolution base the lane falls back to (§1.1).
func workspaceDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("a workspace root is required (--workspace DIR)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", abs)
	}
	if len(abs) > 1024 {
		return "", fmt.Errorf("workspace path is %d bytes; the lane accepts at most 1024", len(abs))
	}
	return abs, nil
}

// pendingKey returns the key of an interrupted enrollment, or a new one,
// stored (0600) before it is ever sent anywhere.
func pendingKey(dir string) (ed25519.PrivateKey, error) {
	priv, err := LoadKey(dir)
	if err == nil {
		return priv, nil
	}
	if !errors.Is(err, ErrNoKey) {
		return nil, err
	}
	if priv, err = GenerateKey(); err != nil {
		return nil, err
	}
	if err := WriteKey(dir, priv); err != nil {
		return nil, err
	}
	return priv, nil
}

// register posts the body until an answer is final: 200, a refusal, or the
// attempt cap. 429 waits retry-after exactly (at least 1 s); a transport
// error or a 503 waits retry-after or 1, 2, 4 … s. Every wait counts toward
// the cap. Nothing here logs the body: it carries the token.
func register(ctx context.Context, o EnrollOptions, endpoint string, body []byte) (string, error) {
	var last error
	for attempt := 1; ; attempt++ {
		id, wait, err := registerOnce(ctx, o, endpoint, body)
		if err == nil {
			return id, nil
		}
		last = err
		if wait == 0 {
			return "", err // final
		}
		if attempt >= MaxEnrollAttempts {
			return "", fmt.Errorf("gave up after %d attempts (ten failures in a row mean the token or the credential is wrong, not that the network is slow): %w", attempt, last)
		}
		if wait < 0 { // no retry-after: exponential from 1 s
			wait = minRetryWait << min(attempt-1, 5)
		}
		wait = max(wait, minRetryWait)
		o.Logger.Warn("enrollment not answered yet; retrying", "attempt", attempt, "wait", wait.String(), "err", err)
		if err := o.Sleep(ctx, wait); err != nil {
			return "", fmt.Errorf("enrollment interrupted: %w (last answer: %v)", err, last)
		}
	}
}

// registerOnce makes one attempt. wait is 0 for a final answer, the
// retry-after for a retryable one, or -1 for retryable with no retry-after.
func registerOnce(ctx context.Context, o EnrollOptions, endpoint string, body []byte) (id string, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+o.APIKey)
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, context.Cause(ctx)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the message already; keep it short
		}
		return "", -1, fmt.Errorf("cannot reach the lane: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", -1, fmt.Errorf("reading the lane's answer: %w", err)
	}
	var ans struct {
		DeviceID  string `json:"deviceId"`
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	}
	json.Unmarshal(b, &ans) // a non-JSON body leaves the fields empty
	switch {
	case resp.StatusCode == http.StatusOK:
		if !strings.HasPrefix(ans.DeviceID, "dev_") || !protocol.ValidULID(strings.TrimPrefix(ans.DeviceID, "dev_")) {
			return "", 0, fmt.Errorf("the lane answered 200 without a valid deviceId")
		}
		return ans.DeviceID, 0, nil
	case resp.StatusCode == http.StatusForbidden && ans.ErrorCode == "device.enrollment_invalid":
		return "", 0, &EnrollmentInvalidError{}
	case resp.StatusCode == http.StatusTooManyRequests:
		return "", retryAfter(resp.Header.Get("Retry-After"), minRetryWait), &APIError{resp.StatusCode, ans.ErrorCode, ans.Message}
	case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusGatewayTimeout:
		return "", retryAfter(resp.Header.Get("Retry-After"), -1), &APIError{resp.StatusCode, ans.ErrorCode, ans.Message}
	}
	return "", 0, &APIError{resp.StatusCode, ans.ErrorCode, ans.Message}
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
