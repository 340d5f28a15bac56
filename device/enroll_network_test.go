package device_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
)

// fakeTime is the enrollment's clock and sleeper: a sleep moves the clock
// and is recorded.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeTime() *fakeTime { return &fakeTime{now: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)} }

func (f *fakeTime) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeTime) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	return nil
}

func (f *fakeTime) slept() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sleeps)
}

func (f *fakeTime) use(o *device.EnrollOptions) { o.Now, o.Sleep = f.Now, f.Sleep }

var quiet = slog.New(slog.DiscardHandler)

func seconds(s ...int) []time.Duration {
	var out []time.Duration
	for _, n := range s {
		out = append(out, time.Duration(n)*time.Second)
	}
	return out
}

// The schedule of network retries: 1, 2, 4, 8, then 10 s, until the next
// wait would end 60 s or more after the first failure.
var unreachableSchedule = seconds(1, 2, 4, 8, 10, 10, 10, 10)

// closedPort is the URL of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String()
}

// networkOptions enrolls into a state dir two levels below an existing
// directory (so enroll creates both) against server.
func networkOptions(t *testing.T, server string, ft *fakeTime) (device.EnrollOptions, string) {
	root := t.TempDir()
	o := device.EnrollOptions{Server: server, Token: "set_x", APIKey: "sema_x", WorkspaceRoot: t.TempDir(),
		StateDir: filepath.Join(root, "made", "state"), Logger: quiet}
	ft.use(&o)
	return o, root
}

// Each class of network error is told apart from a refusal, retried on the
// network schedule for less than 60 s, and then said as "cannot reach the
// lane at URL: …". A request that never left this machine leaves no state
// dir; one that was sent without an answer keeps the key for a replay.
func TestEnrollTellsNetworkErrorsApart(t *testing.T) {
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // its side of the refused handshakes
	untrusted.StartTLS()
	defer untrusted.Close()
	cases := []struct {
		name, server string
		class        device.NetClass
		reason       string
		sent         bool
	}{
		{"closed port", closedPort(t), device.NetRefused, "connection refused", false},
		{"unresolvable name", "http://sema-enroll-test.invalid", device.NetDNS, "does not resolve", false},
		{"https to a plain HTTP server", strings.Replace(plain.URL, "http:", "https:", 1), device.NetTLS, "does not speak TLS", false},
		{"an untrusted certificate", untrusted.URL, device.NetTLS, "certificate is not trusted", false},
		{"no answer", silentServer(t), device.NetTimeout, "no answer within", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTime()
			o, root := networkOptions(t, tc.server, ft)
			o.AttemptTimeout = 100 * time.Millisecond
			_, err := device.Enroll(t.Context(), o)
			var ue *device.UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("got %v, want UnreachableError", err)
			}
			if ue.Class != tc.class || !strings.Contains(ue.Reason, tc.reason) {
				t.Errorf("class %v reason %q, want %v %q", ue.Class, ue.Reason, tc.class, tc.reason)
			}
			// An untrusted certificate, the self-signed one of a newcomer's
			// lane, says how to trust it.
			if advised := strings.Contains(err.Error(), "self-signed"); advised != (tc.name == "an untrusted certificate") {
				t.Errorf("message %q: advice on trusting a certificate %v", err, advised)
			}
			if prefix := "cannot reach the lane at " + tc.server + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q does not start %q", err, prefix)
			}
			if got := ft.slept(); !slices.Equal(got, unreachableSchedule) {
				t.Errorf("waits %v, want %v", got, unreachableSchedule)
			}
			if tc.sent {
				requireKeyKept(t, o.StateDir, err)
			} else {
				requireNothingLeft(t, root)
			}
		})
	}
}

// Network errors are retried for at most 60 s in total: the waits end
// before the budget, and every attempt is bounded by what is left of it.
func TestEnrollNetworkErrorsRetryAtMost60Seconds(t *testing.T) {
	ft := newFakeTime()
	o, _ := networkOptions(t, closedPort(t), ft)
	_, err := device.Enroll(t.Context(), o)
	var ue *device.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v", err)
	}
	var total time.Duration
	for _, d := range ft.slept() {
		total += d
	}
	if total >= device.MaxUnreachableRetry || ue.For != total || ue.Attempts != len(unreachableSchedule)+1 {
		t.Errorf("waited %s over %d attempts (error: %s over %d), want under %s", total, len(ft.slept())+1, ue.For, ue.Attempts, device.MaxUnreachableRetry)
	}
	// A shorter budget is honoured too.
	ft = newFakeTime()
	o, _ = networkOptions(t, closedPort(t), ft)
	o.UnreachableRetry = 3 * time.Second
	if _, err := device.Enroll(t.Context(), o); !errors.As(err, &ue) || !slices.Equal(ft.slept(), seconds(1)) {
		t.Errorf("3 s budget: waits %v, %v", ft.slept(), err)
	}
	o.UnreachableRetry = 61 * time.Second
	if _, err := device.Enroll(t.Context(), o); err == nil || !strings.Contains(err.Error(), "between 0 and 1m0s") {
		t.Errorf("61 s budget accepted: %v", err)
	}
}

// §1.1: a lost answer is retried with the same key and the same token, and
// the replay gets the same deviceId. Within one enroll; and across two,
// when every answer of the first was lost: the key survives the failure.
func TestEnrollLostAnswerStaysRetryableWithTheSameKey(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)
	var lose atomic.Int32
	lossy := answerLosingProxy(t, l.url, &lose)

	lose.Store(1)
	ft := newFakeTime()
	o := enrollOptions(l, filepath.Join(t.TempDir(), "state"), t.TempDir(), key, l.token(t, key))
	o.Server = lossy
	ft.use(&o)
	rec, err := device.Enroll(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ft.slept(), seconds(1)) {
		t.Errorf("waits %v, want one network retry", ft.slept())
	}
	if devs, _ := l.store.ListDevices(t.Context(), mustCaller(t, l, key), store.DevicePage{}); len(devs) != 1 || devs[0].ID != rec.DeviceID {
		t.Fatalf("lane devices %+v, want the one %s", devs, rec.DeviceID)
	}

	lose.Store(1000)
	o = enrollOptions(l, filepath.Join(t.TempDir(), "state"), t.TempDir(), key, l.token(t, key))
	o.Server = lossy
	o.UnreachableRetry = 3 * time.Second // two attempts: the lane's rate budget is 10 a minute
	newFakeTime().use(&o)
	_, err = device.Enroll(t.Context(), o)
	var ue *device.UnreachableError
	if !errors.As(err, &ue) || ue.Class != device.NetOther {
		t.Fatalf("got %v, want UnreachableError without a class", err)
	}
	requireKeyKept(t, o.StateDir, err)
	o.Server = l.url // the network is back
	again, err := device.Enroll(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := l.store.ListDevices(t.Context(), mustCaller(t, l, key), store.DevicePage{})
	if len(devs) != 2 || !slices.ContainsFunc(devs, func(d store.Device) bool { return d.ID == again.DeviceID }) {
		t.Fatalf("lane devices %+v after the replay, want 2 with %s", devs, again.DeviceID)
	}
}

// answerLosingProxy forwards to the lane and, while lose > 0, drops the
// connection instead of passing the lane's answer on.
func answerLosingProxy(t *testing.T, lane string, lose *atomic.Int32) string {
	u, _ := url.Parse(lane)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if lose.Add(-1) >= 0 {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		io.Copy(w, rec.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Answers are refusals, not network errors: a lane answering 503 is asked
// ten times on the §1.1 schedule, and the key is kept (a 5xx does not
// prove the registration did not happen).
func TestEnrollUnavailableIsARefusalUnderTheAttemptCap(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, `{"errorCode":"service.busy","message":"busy"}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ft := newFakeTime()
	o, _ := networkOptions(t, srv.URL, ft)
	_, err := device.Enroll(t.Context(), o)
	var ue *device.UnreachableError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "gave up after 10 attempts: the lane is not serving enrollments now") {
		t.Fatalf("got %v", err)
	}
	if n.Load() != device.MaxEnrollAttempts || !slices.Equal(ft.slept(), seconds(1, 2, 4, 8, 16, 32, 32, 32, 32)) {
		t.Errorf("%d attempts, waits %v", n.Load(), ft.slept())
	}
	requireKeyKept(t, o.StateDir, err)
}

// §1.1: 429 honours retry-after exactly, and never retries faster than
// once per second (a retry-after of 0 waits 1 s).
func TestEnrollRateLimitedWaitsRetryAfterExactlyNeverUnderASecond(t *testing.T) {
	var n atomic.Int32
	deviceID := ids.New(ids.Device)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			fmt.Fprintf(w, `{"deviceId":%q}`, deviceID)
		}
	}))
	defer srv.Close()
	ft := newFakeTime()
	o, _ := networkOptions(t, srv.URL, ft)
	rec, err := device.Enroll(t.Context(), o)
	if err != nil || rec.DeviceID != deviceID {
		t.Fatalf("got %+v, %v", rec, err)
	}
	if !slices.Equal(ft.slept(), seconds(1, 7)) {
		t.Errorf("waits %v, want [1s 7s]", ft.slept())
	}
}

// A failed enrollment leaves no state dir it created, and a state dir that
// was there as it was: minus the key this run made, when the lane refused
// or never saw it; plus nothing. A pending key of an earlier run is kept
// unless the lane refused it.
func TestEnrollFailureLeavesNoStateDir(t *testing.T) {
	l := newRealLane(t)
	key := l.user(t)

	t.Run("created, unreachable", func(t *testing.T) {
		o, root := networkOptions(t, closedPort(t), newFakeTime())
		if _, err := device.Enroll(t.Context(), o); err == nil {
			t.Fatal("enrolled against a closed port")
		}
		requireNothingLeft(t, root)
	})
	t.Run("created, refused", func(t *testing.T) {
		root := t.TempDir()
		o := enrollOptions(l, filepath.Join(root, "made", "state"), t.TempDir(), key+"x", "set_x")
		var ae *device.APIError
		if _, err := device.Enroll(t.Context(), o); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Fatalf("bad API key: %v", err)
		}
		requireNothingLeft(t, root)
	})
	t.Run("there, unreachable", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "notes"), []byte("mine"), 0o600)
		o, _ := networkOptions(t, closedPort(t), newFakeTime())
		o.StateDir = dir
		device.Enroll(t.Context(), o)
		if names := dirNames(t, dir); !slices.Equal(names, []string{"notes"}) {
			t.Errorf("the state dir holds %v, want it as it was", names)
		}
	})
	t.Run("there with a pending key, unreachable", func(t *testing.T) {
		dir := t.TempDir()
		pending := writePendingKey(t, dir)
		o, _ := networkOptions(t, closedPort(t), newFakeTime())
		o.StateDir = dir
		device.Enroll(t.Context(), o)
		if got, err := os.ReadFile(filepath.Join(dir, device.KeyFile)); err != nil || string(got) != pending {
			t.Errorf("the pending key of an earlier run is gone or changed: %v", err)
		}
	})
	t.Run("there with a pending key, enrollment_invalid", func(t *testing.T) {
		dir := t.TempDir()
		writePendingKey(t, dir)
		var inv *device.EnrollmentInvalidError
		if _, err := device.Enroll(t.Context(), enrollOptions(l, dir, t.TempDir(), key, "set_unknown")); !errors.As(err, &inv) {
			t.Fatalf("got %v", err)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("the refused key stayed: %v", names)
		}
	})
}

func writePendingKey(t *testing.T, dir string) string {
	priv, err := device.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := device.WriteKey(dir, priv); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, device.KeyFile))
	return string(b)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// requireNothingLeft: root (which existed) is empty again.
func requireNothingLeft(t *testing.T, root string) {
	t.Helper()
	if names := dirNames(t, root); len(names) != 0 {
		t.Errorf("a failed enrollment left %v in %s", names, root)
	}
}

// requireKeyKept: the key stays for a replay, and the message says so.
func requireKeyKept(t *testing.T, dir string, err error) {
	t.Helper()
	if _, serr := device.LoadKey(dir); serr != nil {
		t.Errorf("the key that may be registered is gone: %v", serr)
	}
	if !strings.Contains(err.Error(), "run the same enroll again with the same token") {
		t.Errorf("the message does not say the key was kept for a replay: %v", err)
	}
}

// One attempt is said in the singular.
func TestUnreachableSaysOneAttempt(t *testing.T) {
	e := &device.UnreachableError{URL: "http://x", Reason: "connection refused", Attempts: 1}
	if msg := e.Error(); !strings.Contains(msg, "(1 attempt over 0s)") {
		t.Errorf("%q", msg)
	}
}
