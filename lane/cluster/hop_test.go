package cluster

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var testSecret = strings.Repeat("s", 32)

type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

func newTestHop(t testing.TB, secret, self string, clock *fixedClock) *Hop {
	t.Helper()
	h, err := NewHop(secret, self, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestAHopSignedByAReplicaVerifies(t *testing.T) {
	clock := &fixedClock{time.UnixMilli(1_700_000_000_000)}
	a, b := newTestHop(t, testSecret, "rep_A", clock), newTestHop(t, testSecret, "rep_B", clock)
	r := httptest.NewRequest("POST", "/v1/devices/dev_X/instructions?x=1", nil)
	if _, err := b.Verify(r); !errors.Is(err, ErrNotAHop) || IsHop(r) {
		t.Fatalf("a plain request: Verify = %v, IsHop = %v; want ErrNotAHop, false", err, IsHop(r))
	}
	a.Sign(r, "192.0.2.7", nil)
	got, err := b.Verify(r)
	if err != nil || got.From != "rep_A" || got.ClientAddr != "192.0.2.7" || !IsHop(r) {
		t.Fatalf("Verify = %+v, %v; want from rep_A for 192.0.2.7", got, err)
	}
}

func TestAHopThatIsNotTheSendersIsRefused(t *testing.T) {
	clock := &fixedClock{time.UnixMilli(1_700_000_000_000)}
	a := newTestHop(t, testSecret, "rep_A", clock)
	other := newTestHop(t, strings.Repeat("o", 32), "rep_A", clock)
	for name, alter := range map[string]func(r *httptestRequest){
		"another secret":              func(r *httptestRequest) { other.Sign(r.Request, "192.0.2.7", nil) },
		"another caller's credential": func(r *httptestRequest) { r.Header.Set("Authorization", "Bearer sema_someone_else") },
		"another nonce":               func(r *httptestRequest) { r.Header.Set(HeaderNonce, strings.Repeat("0", 32)) },
		"a body now covered":          func(r *httptestRequest) { r.Header.Set(HeaderBody, strings.Repeat("0", 64)) },
		"another path":                func(r *httptestRequest) { r.URL.Path = "/v1/devices/dev_Y/instructions" },
		"another query":               func(r *httptestRequest) { r.URL.RawQuery = "x=2" },
		"another method":              func(r *httptestRequest) { r.Method = "GET" },
		"another client":              func(r *httptestRequest) { r.Header.Set(HeaderFor, "198.51.100.1") },
		"another sender":              func(r *httptestRequest) { r.Header.Set(HeaderFrom, "rep_C") },
		"no signature":                func(r *httptestRequest) { r.Header.Del(HeaderSignature) },
		"a time not a time":           func(r *httptestRequest) { r.Header.Set(HeaderAt, "soon") },
	} {
		t.Run(name, func(t *testing.T) {
			r := &httptestRequest{httptest.NewRequest("POST", "/v1/devices/dev_X/instructions?x=1", nil)}
			r.Header.Set("Authorization", "Bearer sema_the_caller")
			a.Sign(r.Request, "192.0.2.7", nil)
			alter(r)
			if _, err := a.Verify(r.Request); err == nil || errors.Is(err, ErrNotAHop) {
				t.Fatalf("Verify = %v; want a refusal", err)
			}
		})
	}
}

type httptestRequest struct{ *http.Request }

func TestAHopOutsideTheWindowIsRefused(t *testing.T) {
	clock := &fixedClock{time.UnixMilli(1_700_000_000_000)}
	a := newTestHop(t, testSecret, "rep_A", clock)
	for _, skew := range []time.Duration{HopWindow + time.Second, -HopWindow - time.Second} {
		r := httptest.NewRequest("POST", "/v1/instructions/ins_X/cancel", nil)
		a.Sign(r, "192.0.2.7", nil)
		clock.t = clock.t.Add(skew)
		if _, err := a.Verify(r); err == nil {
			t.Errorf("a hop %v old verified", skew)
		}
		clock.t = clock.t.Add(-skew)
		if _, err := a.Verify(r); err != nil {
			t.Errorf("the same hop on time: %v", err)
		}
	}
}

func TestNewHopRefusesAShortSecret(t *testing.T) {
	if _, err := NewHop("short", "rep_A", time.Now); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
}

// A body held whole is in the signature: the same hop with another body is
// refused, and the signed body is what the handler then reads.
func TestAHopWithAnotherBodyIsRefused(t *testing.T) {
	clock := &fixedClock{time.UnixMilli(1_700_000_000_000)}
	a, b := newTestHop(t, testSecret, "rep_A", clock), newTestHop(t, testSecret, "rep_B", clock)
	signed := []byte(`{"kind":"exec","args":{"command":"true"},"timeoutMs":1000}`)
	r := httptest.NewRequest("POST", "/v1/devices/dev_X/instructions", bytes.NewReader(signed))
	a.Sign(r, "192.0.2.7", signed)
	swapped := r.Clone(r.Context())
	swapped.Body = io.NopCloser(strings.NewReader(`{"kind":"exec","args":{"command":"rm -rf ~"},"timeoutMs":1000}`))
	if _, err := b.Verify(swapped); err == nil || !strings.Contains(err.Error(), "body") {
		t.Fatalf("a swapped body: %v, want a refusal", err)
	}
	if _, err := b.Verify(r); err != nil {
		t.Fatalf("the signed body: %v", err)
	}
	if got, _ := io.ReadAll(r.Body); !bytes.Equal(got, signed) {
		t.Fatalf("the handler reads %q, want the signed body", got)
	}
}

// A hop verifies once: the same request sent again within the window (a
// captured hop, replayed) is refused; its nonce is forgotten only once the
// hop could no longer verify anyway.
func TestAHopReplayedIsRefused(t *testing.T) {
	clock := &fixedClock{time.UnixMilli(1_700_000_000_000)}
	a, b := newTestHop(t, testSecret, "rep_A", clock), newTestHop(t, testSecret, "rep_B", clock)
	r := httptest.NewRequest("POST", "/v1/instructions/ins_X/cancel", nil)
	a.Sign(r, "192.0.2.7", []byte{})
	if _, err := b.Verify(r); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(HopWindow - time.Second)
	if _, err := b.Verify(r); err == nil || !strings.Contains(err.Error(), "replay") {
		t.Fatalf("a replay within the window: %v", err)
	}
	clock.t = clock.t.Add(3 * HopWindow)
	if _, err := b.Verify(r); err == nil || strings.Contains(err.Error(), "replay") {
		t.Fatalf("a replay past the window is refused by its time, not by a remembered nonce: %v", err)
	}
}

// A rotation: a receiver that verifies both secrets takes hops signed with
// either; once only the new one is kept, a hop signed with the old one is
// refused. Keys that would sign with a secret they do not verify, or hold
// a short one, are refused.
func TestAHopVerifiesWithEitherSecretWhileTheClusterMovesToANewOne(t *testing.T) {
	clock := &fixedClock{time.UnixMilli(1_700_000_000_000)}
	old, next := testSecret, strings.Repeat("n", 32)
	sender := newTestHop(t, old, "rep_A", clock)
	receiver := newTestHop(t, next, "rep_B", clock)
	if err := receiver.SetKeys(Keys{Sign: next, Verify: []string{next, old}}); err != nil {
		t.Fatal(err)
	}
	for _, sign := range []string{old, next} {
		if err := sender.SetKeys(Keys{Sign: sign, Verify: []string{sign}}); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/v1/devices/dev_X/instructions", nil)
		sender.Sign(r, "192.0.2.7", nil)
		if _, err := receiver.Verify(r); err != nil {
			t.Fatalf("signed with the %s secret while both verify: %v", map[bool]string{true: "old", false: "new"}[sign == old], err)
		}
	}
	if err := receiver.SetKeys(Keys{Sign: next, Verify: []string{next}}); err != nil {
		t.Fatal(err)
	}
	sender.SetKeys(Keys{Sign: old, Verify: []string{old}})
	r := httptest.NewRequest("POST", "/v1/devices/dev_X/instructions", nil)
	sender.Sign(r, "192.0.2.7", nil)
	if _, err := receiver.Verify(r); err == nil {
		t.Fatal("a hop signed with the rotated-out secret verified")
	}
	if err := receiver.SetKeys(Keys{Sign: old, Verify: []string{next}}); err == nil {
		t.Fatal("keys that sign with a secret they do not verify were accepted")
	}
	if err := receiver.SetKeys(Keys{Sign: "short", Verify: []string{"short"}}); err == nil {
		t.Fatal("a short secret was accepted")
	}
}
