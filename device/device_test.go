package device_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"github.com/sema-agent/sema/internal/clock"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

func TestStateDirResolution(t *testing.T) {
	t.Setenv(device.EnvStateDir, "/from/env")
	if d, _ := device.StateDir("/from/flag"); d != "/from/flag" {
		t.Errorf("flag: got %s", d)
	}
	if d, _ := device.StateDir(""); d != "/from/env" {
		t.Errorf("env: got %s", d)
	}
	t.Setenv(device.EnvStateDir, "")
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	if d, _ := device.StateDir(""); d != "/xdg/sema/device" {
		t.Errorf("default: got %s", d)
	}
	t.Setenv(device.EnvStateDir, "rel/dir")
	if d, _ := device.StateDir(""); !filepath.IsAbs(d) {
		t.Errorf("relative: got %s, want absolute", d)
	}
}

func TestKeyIsOwnerOnlyAndRefusedOtherwise(t *testing.T) {
	dir := t.TempDir()
	priv, err := device.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := device.WriteKey(dir, priv); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, device.KeyFile)
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("device.key mode %04o, want 0600", fi.Mode().Perm())
	}
	got, err := device.LoadKey(dir)
	if err != nil || !got.Equal(priv) {
		t.Fatalf("LoadKey: %v", err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o660, 0o606} {
		os.Chmod(path, mode)
		_, err := device.LoadKey(dir)
		var pe *device.KeyPermissionError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: got %v, want a KeyPermissionError telling the fix", mode, err)
		}
	}
	os.Chmod(path, 0o400)
	if _, err := device.LoadKey(dir); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
	os.Remove(path)
	if _, err := device.LoadKey(dir); !errors.Is(err, device.ErrNoKey) {
		t.Errorf("no key: got %v", err)
	}
}

func TestLockExcludesASecondHolder(t *testing.T) {
	state, machine := t.TempDir(), t.TempDir()
	os.Chmod(machine, 0o700)
	l1, warn, err := device.AcquireLock(state, machine, "dev_A")
	if err != nil || warn != nil {
		t.Fatalf("first lock: %v %v", err, warn)
	}
	_, _, err = device.AcquireLock(state, machine, "dev_A")
	var le *device.LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || !strings.Contains(err.Error(), "already serving device dev_A") {
		t.Fatalf("second lock: got %v, want LockedError naming pid %d", err, os.Getpid())
	}
	// A copy of the state dir (another path, same device id) is caught by
	// the machine-wide lock.
	if _, _, err := device.AcquireLock(t.TempDir(), machine, "dev_A"); !errors.As(err, &le) {
		t.Fatalf("copied state dir: got %v, want LockedError", err)
	}
	// Another device is independent.
	l2, _, err := device.AcquireLock(state, machine, "dev_B")
	if err != nil {
		t.Fatalf("other device: %v", err)
	}
	l2.Release()
	l1.Release()
	l3, _, err := device.AcquireLock(state, machine, "dev_A")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l3.Release()
}

// realLane is the lane's real enrollment plane over real HTTP on SQLite,
// with its rate limiter's clock in the test's hands.
type realLane struct {
	url   string
	store store.Store
	clock *clock.Fake // the lane's
}

func (l *realLane) advance(d time.Duration) { l.clock.Advance(d) }

func newRealLane(t *testing.T) *realLane {
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := &realLane{store: st, clock: clock.NewFake(time.Date(2026, 11, 30, 8, 0, 10, 0, time.UTC))}
	srv, err := lane.New(lane.Config{Store: st, Clock: l.clock})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(srv))
	t.Cleanup(func() {
		hs.Close()
		srv.Shutdown(context.Background())
	})
	l.url = hs.URL
	return l
}

func (l *realLane) user(t *testing.T) string {
	_, key, err := lane.CreateIdentity(t.Context(), l.store, "user")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (l *realLane) token(t *testing.T, apiKey string) string {
	res, err := lanetest.IssueToken(t.Context(), l.url, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func enrollOptions(l *realLane, dir, ws, apiKey, token string) device.EnrollOptions {
	return device.EnrollOptions{Server: l.url + "/", Token: token, APIKey: apiKey, WorkspaceRoot: ws, StateDir: dir, DisplayName: "laptop", Logger: quiet}
}

func TestEnrollAgainstTheRealLane(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)
	dir, ws := filepath.Join(t.TempDir(), "state"), t.TempDir()
	rec, err := device.Enroll(t.Context(), enrollOptions(l, dir, ws, key, l.token(t, key)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.DeviceID, "dev_") || rec.Server != l.url || rec.WorkspaceRoot != ws {
		t.Fatalf("record %+v", rec)
	}
	stored, err := device.LoadRecord(dir)
	if err != nil || stored.DeviceID != rec.DeviceID {
		t.Fatalf("stored record %+v, %v", stored, err)
	}
	priv, err := device.LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := l.store.ListDevices(t.Context(), mustCaller(t, l, key), store.DevicePage{})
	if err != nil || len(devs) != 1 || devs[0].ID != rec.DeviceID {
		t.Fatalf("lane devices %+v, %v", devs, err)
	}
	if !bytes.Equal(devs[0].PublicKey, priv.Public().(ed25519.PublicKey)) {
		t.Fatalf("the lane holds another public key")
	}
	if devs[0].WorkspaceRoot != ws || devs[0].DisplayName != "laptop" {
		t.Fatalf("lane device %+v", devs[0])
	}
	// Nothing in the state dir holds the token.
	tok := "set_"
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if fi != nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), tok) {
				t.Errorf("%s holds the enrollment token", p)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s has mode %04o", p, fi.Mode().Perm())
			}
		}
		return nil
	})
	// A second enrollment into the same state dir is refused.
	if _, err := device.Enroll(t.Context(), enrollOptions(l, dir, ws, key, l.token(t, key))); err == nil || !strings.Contains(err.Error(), "already enrolled") {
		t.Fatalf("re-enroll: got %v", err)
	}
}

// An enrollment whose answer was lost is replayed with the same key and
// the same token, and gets the same deviceId (§1.1).
func TestEnrollReplayAfterALostAnswer(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)
	dir, ws := t.TempDir(), t.TempDir()
	token := l.token(t, key)
	first, err := device.Enroll(t.Context(), enrollOptions(l, dir, ws, key, token))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, device.RecordFile)) // the answer "was lost": the key stayed, the record never came
	again, err := device.Enroll(t.Context(), enrollOptions(l, dir, ws, key, token))
	if err != nil {
		t.Fatal(err)
	}
	if again.DeviceID != first.DeviceID {
		t.Fatalf("replay got %s, first %s", again.DeviceID, first.DeviceID)
	}
	devs, _ := l.store.ListDevices(t.Context(), mustCaller(t, l, key), store.DevicePage{})
	if len(devs) != 1 {
		t.Fatalf("%d devices after a replay, want 1", len(devs))
	}
}

func mustCaller(t *testing.T, l *realLane, key string) string {
	idn, err := l.store.IdentityByAPIKey(t.Context(), store.DigestOf(key))
	if err != nil {
		t.Fatal(err)
	}
	return idn.ID
}

func TestEnrollRefusedSaysAllOfItAndDoesNotRetry(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)
	dir := t.TempDir()
	var sleeps []time.Duration
	o := enrollOptions(l, dir, t.TempDir(), key, "set_not-a-real-token")
	o.Sleep = func(ctx context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
	_, err := device.Enroll(t.Context(), o)
	var inv *device.EnrollmentInvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("got %v, want EnrollmentInvalidError", err)
	}
	want := "Enrollment was refused. The token may have expired, may already have been used by another device, or may have been issued to a different account. Ask for a new enrollment token and try again."
	if err.Error() != want {
		t.Errorf("message %q", err.Error())
	}
	if len(sleeps) != 0 {
		t.Errorf("retried a 403: slept %v", sleeps)
	}
	if _, err := os.Stat(filepath.Join(dir, device.KeyFile)); !os.IsNotExist(err) {
		t.Errorf("the key of a refused enrollment was kept: %v", err)
	}
	// A token used with another key is the same refusal.
	token := l.token(t, key)
	if _, err := device.Enroll(t.Context(), enrollOptions(l, t.TempDir(), t.TempDir(), key, token)); err != nil {
		t.Fatal(err)
	}
	if _, err := device.Enroll(t.Context(), enrollOptions(l, t.TempDir(), t.TempDir(), key, token)); !errors.As(err, &inv) {
		t.Fatalf("token reuse with another key: got %v", err)
	}
}

// 429: the lane's retry-after is honoured exactly (never under 1 s), the
// same token and key are retried, and the attempts are capped at ten.
func TestEnrollHonoursRetryAfter(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)
	// Spend the caller's register budget (10 per 60 s window).
	spend(t, l, key)
	token := l.token(t, key) // a separate bucket: still allowed
	var sleeps []time.Duration
	o := enrollOptions(l, t.TempDir(), t.TempDir(), key, token)
	o.Sleep = func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		l.advance(d) // the lane's window moves exactly as far as we waited
		return nil
	}
	rec, err := device.Enroll(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The window is aligned to whole minutes and the clock stands at
	// 08:00:10, so retry-after is 50 s.
	if len(sleeps) != 1 || sleeps[0] != 50*time.Second {
		t.Fatalf("slept %v, want exactly [50s]", sleeps)
	}
	if !strings.HasPrefix(rec.DeviceID, "dev_") {
		t.Fatalf("record %+v", rec)
	}

	// A lane that keeps answering 429 is tried ten times, then given up.
	sleeps = nil
	o = enrollOptions(l, t.TempDir(), t.TempDir(), key, token)
	o.Sleep = func(ctx context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
	spend(t, l, key)
	_, err = device.Enroll(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "gave up after 10 attempts") {
		t.Fatalf("got %v", err)
	}
	if len(sleeps) != 9 {
		t.Fatalf("%d waits, want 9 between 10 attempts", len(sleeps))
	}
	for _, d := range sleeps {
		if d < time.Second {
			t.Errorf("waited %v, under a second", d)
		}
	}
}

func TestEnrollRefusesBadInput(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)
	o := enrollOptions(l, t.TempDir(), t.TempDir(), key, "set_x")
	o.GOOS = "windows"
	if _, err := device.Enroll(t.Context(), o); err == nil || !strings.Contains(err.Error(), "darwin and linux only") {
		t.Errorf("windows: %v", err)
	}
	// No API key: the token is sent as the credential; one the lane does
	// not know is refused as every bad enrollment is.
	o = enrollOptions(l, t.TempDir(), t.TempDir(), "", "set_x")
	if _, err := device.Enroll(t.Context(), o); err == nil || !strings.Contains(err.Error(), "Enrollment was refused") {
		t.Errorf("no api key, an unknown token: %v", err)
	}
	// A missing workspace says what to do, and that the token was not
	// spent: nothing was sent.
	o = enrollOptions(l, t.TempDir(), "/does/not/exist", key, "set_x")
	if _, err := device.Enroll(t.Context(), o); err == nil || !strings.Contains(err.Error(), "--workspace /does/not/exist does not exist: create it (mkdir -p) or name another directory (the token was not used)") {
		t.Errorf("missing workspace: %v", err)
	}
	// A workspace or name that is not UTF-8 would reach the lane with
	// U+FFFD in its place: the lane would resolve paths against another
	// directory. Refused before anything is sent.
	notUTF8 := filepath.Join(t.TempDir(), "ws\xff")
	if err := os.Mkdir(notUTF8, 0o700); err != nil {
		t.Fatal(err)
	}
	o = enrollOptions(l, t.TempDir(), notUTF8, key, "set_x")
	if _, err := device.Enroll(t.Context(), o); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("a workspace that is not UTF-8: %v", err)
	}
	o = enrollOptions(l, t.TempDir(), t.TempDir(), key, "set_x")
	o.DisplayName = "box\xff"
	if _, err := device.Enroll(t.Context(), o); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("a name that is not UTF-8: %v", err)
	}
	o = enrollOptions(l, t.TempDir(), t.TempDir(), key+"x", "set_x")
	var ae *device.APIError
	if _, err := device.Enroll(t.Context(), o); !errors.As(err, &ae) || ae.Code != "auth.forbidden" {
		t.Errorf("bad api key: %v", err)
	}
}

// spend uses up the caller's register budget with refused attempts that do
// not wait (their sleeper gives up at once).
func spend(t *testing.T, l *realLane, key string) {
	for range 10 {
		o := enrollOptions(l, t.TempDir(), t.TempDir(), key, "set_bogus")
		o.Sleep = func(context.Context, time.Duration) error { return errors.New("not waiting") }
		device.Enroll(t.Context(), o)
	}
}
