package device

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// EnrollmentInvalidError is the lane's 403 device.enrollment_invalid. It is
// final: the same token must not be retried.
type EnrollmentInvalidError struct{}

func (*EnrollmentInvalidError) Error() string { return api.EnrollmentInvalidText }

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

// EnrollOptions is one `sema device enroll`.
type EnrollOptions struct {
	Server string // the lane's base URL
	Token  string // the one-shot enrollment token; never logged or stored
	// APIKey is the user's credential, sent as Authorization: Bearer; ""
	// sends the token there instead: it stands for the user's credential
	// on this one call, so the machine never needs the user's key.
	APIKey        string
	WorkspaceRoot string // an existing directory; made absolute
	DisplayName   string
	StateDir      string

	HTTPClient *http.Client // default http.DefaultClient
	Sleep      Sleeper      // default Sleep
	Now        func() time.Time
	// UnreachableRetry is how long network errors are retried, from the
	// first of a run of them; default and most MaxUnreachableRetry.
	UnreachableRetry time.Duration
	// AttemptTimeout bounds one request; default 15 s.
	AttemptTimeout time.Duration
	Logger         *slog.Logger
	GOOS           string // default runtime.GOOS; only darwin and linux enroll
	GOARCH         string // default runtime.GOARCH
}

// Enroll registers this machine as a device (§1.1): it generates the key
// pair here (or reuses the key of an enrollment that was interrupted before
// its answer arrived, so a retry with the same token is a safe replay),
// posts the closed body with the user's credential, and stores the device
// record beside the key. It refuses a state dir that already holds a live
// enrollment.
//
// A failed enrollment leaves no state dir behind that it created, and a
// state dir that was there as it was, with one exception each way: the
// pending key is deleted when the lane refused it (403
// device.enrollment_invalid), and kept — with the directories that hold
// it — when the lane may have registered it (an attempt whose request left
// this machine got no answer, or a 5xx): only the same key can replay that
// registration with the same token (§1.1); a new key would be refused as
// token reuse. A key this run generated that provably never reached the
// lane is deleted.
func Enroll(ctx context.Context, o EnrollOptions) (Record, error) {
	var rec Record
	if err := o.defaults(); err != nil {
		return rec, err
	}
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
		o.APIKey = o.Token
	}
	ws, err := workspaceDir(o.WorkspaceRoot)
	if err != nil {
		return rec, err
	}
	if !utf8.ValidString(o.DisplayName) {
		// JSON would carry U+FFFD in place of each bad byte.
		return rec, fmt.Errorf("--name %q is not valid UTF-8, which the lane cannot carry", o.DisplayName)
	}
	made, err := makeStateDir(o.StateDir)
	if err != nil {
		return rec, err
	}
	rec, err = enrollInto(ctx, o, base, ws)
	if err != nil {
		removeMade(made) // only what is empty: a kept key keeps its dir
		return rec, err
	}
	o.Logger.Info("device enrolled", "deviceId", rec.DeviceID, "server", base, "stateDir", o.StateDir)
	return rec, nil
}

// enrollInto enrolls into an existing state dir, and decides the pending
// key's fate when it fails (see Enroll).
func enrollInto(ctx context.Context, o EnrollOptions, base, ws string) (Record, error) {
	var rec Record
	if old, err := LoadRecord(o.StateDir); err == nil && old.RevokedAt == nil {
		return rec, fmt.Errorf("the state dir %s is already enrolled as device %s; use another --state-dir to enroll another device", o.StateDir, old.DeviceID)
	} else if err != nil && !errors.Is(err, ErrNotEnrolled) {
		return rec, err
	}
	priv, fresh, err := pendingKey(o.StateDir)
	if err != nil {
		return rec, err
	}
	body, err := json.Marshal(api.EnrollRequest{
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
	deviceID, landed, err := register(ctx, o, base, body)
	var invalid *EnrollmentInvalidError
	switch {
	case err == nil:
	case errors.As(err, &invalid), fresh && !landed:
		// Refused under this token, or never reached the lane: no
		// registration can be completed with this key.
		return rec, errors.Join(err, RemoveKey(o.StateDir))
	case landed:
		return rec, fmt.Errorf("%w\nThe lane may have registered this device before its answer was lost, so its key stays in %s: "+
			"run the same enroll again with the same token to finish (the replay gets the same device id). To give up instead, delete %s", err, o.StateDir, o.StateDir)
	default:
		return rec, err // a pending key of an earlier run: it may be registered from then
	}
	rec = Record{DeviceID: deviceID, Server: base, WorkspaceRoot: ws, DisplayName: o.DisplayName, EnrolledAt: o.Now().UTC()}
	if err := WriteRecord(o.StateDir, rec); err != nil {
		return rec, fmt.Errorf("enrolled as %s, but the record could not be stored (run enroll again with the same token to recover): %w", deviceID, err)
	}
	return rec, nil
}

func (o *EnrollOptions) defaults() error {
	if o.UnreachableRetry < 0 || o.UnreachableRetry > MaxUnreachableRetry {
		return fmt.Errorf("the retry time for an unreachable lane must be between 0 and %s (got %s)", MaxUnreachableRetry, o.UnreachableRetry)
	}
	if o.UnreachableRetry == 0 {
		o.UnreachableRetry = MaxUnreachableRetry
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = defaultAttemptTimeout
	}
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
	return nil
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
	if errors.Is(err, fs.ErrNotExist) {
		// Checked before anything is sent: the token is not spent.
		return "", fmt.Errorf("--workspace %s does not exist: create it (mkdir -p) or name another directory (the token was not used)", abs)
	}
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", abs)
	}
	if !utf8.ValidString(abs) {
		// JSON would carry U+FFFD in place of each bad byte, and the lane
		// would resolve paths against a directory that is not this one.
		return "", fmt.Errorf("--workspace %q is not valid UTF-8, which the lane cannot carry: name another directory", abs)
	}
	if len(abs) > 1024 {
		return "", fmt.Errorf("workspace path is %d bytes; the lane accepts at most 1024", len(abs))
	}
	return abs, nil
}

// pendingKey returns the key of an interrupted enrollment, or a new one
// (fresh), stored (0600) before it is ever sent anywhere.
func pendingKey(dir string) (priv ed25519.PrivateKey, fresh bool, err error) {
	priv, err = LoadKey(dir)
	if err == nil {
		return priv, false, nil
	}
	if !errors.Is(err, ErrNoKey) {
		return nil, false, err
	}
	if priv, err = GenerateKey(); err != nil {
		return nil, false, err
	}
	if err := WriteKey(dir, priv); err != nil {
		return nil, false, err
	}
	return priv, true, nil
}
