package nexting

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

// e2e is a host Session and a simulated device (SimConn) on the two ends
// of a real connection, both on one fake clock.
type e2e struct {
	t    *testing.T
	clk  *clock.Fake
	sess *Session
	dev  *SimConn

	queued chan struct{} // one value per ask that joined the session's queue
}

func startE2E(t *testing.T, tr transport, info string) *e2e {
	t.Helper()
	hostEnd, devEnd := tr.pair(t)
	clk := clock.NewFake(t0)
	var raw []byte
	if info != "" {
		raw = []byte(info)
	}
	sim, err := NewSim(raw)
	if err != nil {
		t.Fatal(err)
	}
	dev := ServeSim(devEnd, sim, clk)
	t.Cleanup(func() { dev.Close() })
	sess, err := OpenStream(t.Context(), hostEnd, SessionConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	e := &e2e{t: t, clk: clk, sess: sess, dev: dev, queued: make(chan struct{}, 16)}
	sess.mu.Lock()
	sess.queued = func() { e.queued <- struct{}{} }
	sess.mu.Unlock()
	return e
}

type askResult struct {
	d   Decision
	err error
}

// ask runs Ask in its own goroutine and returns once the ask is queued in
// the session (so the fake clock cannot move before its TTL starts);
// every test receives its result, so the goroutine always ends.
func (e *e2e) ask(ctx context.Context, summary string, ttl time.Duration) <-chan askResult {
	ch := make(chan askResult, 1)
	go func() {
		d, err := e.sess.Ask(ctx, summary, ttl)
		ch <- askResult{d, err}
	}()
	select {
	case <-e.queued:
	case r := <-ch: // decided without queuing (ended session, done context)
		ch <- r
	}
	return ch
}

// waitDevice blocks until the device's view satisfies cond (no timeout:
// the test binary's -timeout bounds a hang).
func waitDevice(t *testing.T, c *SimConn, what string, cond func(SimView) bool) SimView {
	t.Helper()
	for {
		if v := c.View(); cond(v) {
			return v
		}
		select {
		case <-c.Changed():
		case <-c.Done():
			if v := c.View(); cond(v) {
				return v
			}
			t.Fatalf("device ended while waiting for %s", what)
		}
	}
}

func pendingID(id string) func(SimView) bool {
	return func(v SimView) bool { return v.State == DevicePending && v.ID == id }
}

func idle(v SimView) bool { return v.State == DeviceIdle }

func wantDecision(t *testing.T, ch <-chan askResult, want Decision) {
	t.Helper()
	r := <-ch
	if r.err != nil || r.d != want {
		t.Fatalf("ask: %q %v, want %q", r.d, r.err, want)
	}
}

func TestSessionAllowDeny(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := startE2E(t, tr, "")
			if !e.sess.Negotiated().Has(ProfileStatus) || e.sess.Info().Model != "sema-sim" {
				t.Fatalf("negotiated %v, info %+v", e.sess.Negotiated().Profiles(), e.sess.Info())
			}
			res := e.ask(t.Context(), "Allow git push?", 30*time.Second)
			v := waitDevice(t, e.dev, "r1", pendingID("r1"))
			if v.Summary != "Allow git push?" || v.Remaining != 30*time.Second {
				t.Fatalf("device shows %+v", v)
			}
			if !e.dev.Press(ChoiceAllow) {
				t.Fatal("press not sent")
			}
			wantDecision(t, res, DecisionAllow)
			waitDevice(t, e.dev, "resolved", idle) // resolved(answered) cleared it

			res = e.ask(t.Context(), "Allow rm -rf build/?", 30*time.Second)
			waitDevice(t, e.dev, "r2", pendingID("r2"))
			e.dev.Press(ChoiceDeny)
			wantDecision(t, res, DecisionDeny)
			waitDevice(t, e.dev, "resolved", idle)
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := startE2E(t, tr, "")
			res := e.ask(t.Context(), "Allow git push?", 30*time.Second)
			waitDevice(t, e.dev, "r1", pendingID("r1"))
			e.clk.Advance(30*time.Second - time.Millisecond)
			select {
			case r := <-res:
				t.Fatalf("decided before the TTL: %+v", r)
			default:
			}
			e.clk.Advance(time.Millisecond)
			wantDecision(t, res, DecisionExpired)
			waitDevice(t, e.dev, "local expiry", idle)
			// A press now answers nothing.
			if e.dev.Press(ChoiceAllow) {
				t.Fatal("press after expiry sent an answer")
			}
		})
	}
}

func TestSessionDeviceDisconnectIsLost(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := startE2E(t, tr, "")
			first := e.ask(t.Context(), "Allow git push?", 30*time.Second)
			queued := e.ask(t.Context(), "Allow npm publish?", 30*time.Second)
			waitDevice(t, e.dev, "a request", func(v SimView) bool { return v.State == DevicePending })
			e.dev.Close()
			wantDecision(t, first, DecisionLost)
			wantDecision(t, queued, DecisionLost)
			<-e.sess.Done()
			if !errors.Is(e.sess.Err(), io.EOF) && e.sess.Err() == nil {
				t.Fatalf("err %v", e.sess.Err())
			}
			if d, err := e.sess.Ask(t.Context(), "again?", time.Second); d != DecisionLost || err != nil {
				t.Fatalf("ask after loss: %q %v", d, err)
			}
			if err := e.sess.SetStatus(nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("status after loss: %v", err)
			}
		})
	}
}

func TestSessionCancel(t *testing.T) {
	e := startE2E(t, transports[0], "")
	ctx, cancel := context.WithCancel(t.Context())
	res := e.ask(ctx, "Allow git push?", 30*time.Second)
	waitDevice(t, e.dev, "r1", pendingID("r1"))
	cancel()
	wantDecision(t, res, DecisionCancelled)
	waitDevice(t, e.dev, "resolved cancelled", idle) // the TTL has not run: only resolved clears it

	// An ask whose context is already done shows nothing.
	if d, err := e.sess.Ask(ctx, "x", time.Second); d != DecisionCancelled || err != nil {
		t.Fatalf("%q %v", d, err)
	}
	// The next ask gets the next id: nothing else was presented.
	res = e.ask(t.Context(), "next", time.Second)
	waitDevice(t, e.dev, "r2", pendingID("r2"))
	e.dev.Press(ChoiceDeny)
	wantDecision(t, res, DecisionDeny)
}

// Asks made while one is shown wait their turn; their TTL runs from the
// call, and one that runs out while waiting expires without being shown.
func TestSessionQueue(t *testing.T) {
	e := startE2E(t, transports[1], "")
	first := e.ask(t.Context(), "first", 60*time.Second)
	waitDevice(t, e.dev, "r1", pendingID("r1"))
	second := e.ask(t.Context(), "second", 40*time.Second)
	third := e.ask(t.Context(), "third", 10*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	fourth := e.ask(ctx, "fourth", 50*time.Second)
	cancel()
	wantDecision(t, fourth, DecisionCancelled) // withdrawn while waiting: never shown

	e.clk.Advance(10 * time.Second)
	wantDecision(t, third, DecisionExpired) // ran out while waiting
	e.clk.Advance(5 * time.Second)
	e.dev.Press(ChoiceAllow)
	wantDecision(t, first, DecisionAllow)
	v := waitDevice(t, e.dev, "the second ask", func(v SimView) bool { return v.State == DevicePending && v.Summary == "second" })
	if v.Remaining != 25*time.Second {
		t.Fatalf("second shown with %v left, want 25s", v.Remaining)
	}
	e.dev.Press(ChoiceDeny)
	wantDecision(t, second, DecisionDeny)
}

func TestSessionCloseCancelsAsks(t *testing.T) {
	e := startE2E(t, transports[0], "")
	res := e.ask(t.Context(), "Allow git push?", 30*time.Second)
	waitDevice(t, e.dev, "r1", pendingID("r1"))
	e.sess.Close()
	wantDecision(t, res, DecisionCancelled)
	<-e.dev.Done() // the disconnect reached the device
	if v := e.dev.View(); v.State != DeviceIdle {
		t.Fatalf("device after disconnect %+v", v)
	}
	e.sess.Close() // idempotent
}

func TestSessionStatus(t *testing.T) {
	e := startE2E(t, transports[0], "")
	agents := []Agent{{Slot: 0, State: AgentWorking, Label: "build"}, {Slot: 1, State: AgentNeedsInput}}
	if err := e.sess.SetStatus(agents); err != nil {
		t.Fatal(err)
	}
	waitDevice(t, e.dev, "status", func(v SimView) bool { return reflect.DeepEqual(v.Status, agents) })
	if err := e.sess.SetStatus([]Agent{{Slot: 0, State: "asleep"}}); CodeOf(err) != CodeBadMessage {
		t.Fatalf("invalid status: %v", err)
	}
	if err := e.sess.SetStatus(nil); err != nil {
		t.Fatal(err)
	}
	waitDevice(t, e.dev, "cleared", func(v SimView) bool { return len(v.Status) == 0 })

	// A device without status/1.
	e2 := startE2E(t, transports[0], strings.NewReplacer(`,"status/1"]`, `]`, `"statusSlots":4`, `"statusSlots":0`).Replace(DefaultSimDeviceInfo))
	if err := e2.sess.SetStatus(agents); CodeOf(err) != CodeUnsupportedProfile {
		t.Fatalf("status without status/1: %v", err)
	}
}

func TestSessionAskArguments(t *testing.T) {
	e := startE2E(t, transports[0], strings.Replace(DefaultSimDeviceInfo, `"max_summary_bytes":240`, `"max_summary_bytes":10`, 1))
	for _, c := range []struct {
		sum string
		ttl time.Duration
	}{
		{"0123456789X", time.Second}, // over the negotiated summary limit
		{"bad\xff", time.Second},
		{"nul\x00", time.Second},
		{"ok", 0},
		{"ok", time.Millisecond - 1},
		{"ok", 300*time.Second + time.Millisecond},
	} {
		if d, err := e.sess.Ask(t.Context(), c.sum, c.ttl); err == nil || d != "" {
			t.Errorf("Ask(%q, %v) = %q, %v", c.sum, c.ttl, d, err)
		}
	}
	if v := e.dev.View(); v.State != DeviceIdle || v.Refused != 0 {
		t.Fatalf("device saw something: %+v", v)
	}
}

// The session with the system clock (nil Clock), once: nothing here
// depends on elapsed time.
func TestSessionRealClock(t *testing.T) {
	a, b := pipePair(t)
	sim, _ := NewSim(nil)
	dev := ServeSim(b, sim, nil)
	defer dev.Close()
	sess, err := OpenStream(t.Context(), a, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res := make(chan askResult, 1)
	go func() {
		d, err := sess.Ask(t.Context(), "Allow git push?", 300*time.Second)
		res <- askResult{d, err}
	}()
	waitDevice(t, dev, "r1", pendingID("r1"))
	dev.Press(ChoiceAllow)
	wantDecision(t, res, DecisionAllow)
}

// rawDevice is the test playing the device by hand over a pipe.
type rawDevice struct {
	conn net.Conn
	in   *lines
	sess *Session
	clk  *clock.Fake
}

func startRawDevice(t *testing.T) *rawDevice {
	t.Helper()
	hostEnd, devEnd := pipePair(t)
	clk := clock.NewFake(t0)
	opened := make(chan *Session, 1)
	go func() {
		s, err := OpenStream(t.Context(), hostEnd, SessionConfig{Clock: clk})
		if err != nil {
			t.Error(err)
		}
		opened <- s
	}()
	write(t, devEnd, DefaultSimDeviceInfo+"\n")
	s := <-opened
	if s == nil {
		t.FailNow()
	}
	t.Cleanup(func() { s.Close() })
	return &rawDevice{conn: devEnd, in: newLines(t, devEnd), sess: s, clk: clk}
}

// The session answers what it refuses, never silently unless the reply
// would amplify, never an error with an error, and nothing refused ever
// counts as an answer.
func TestSessionRefusesWhatADeviceMayNotSend(t *testing.T) {
	d := startRawDevice(t)
	res := make(chan askResult, 1)
	go func() {
		dec, err := d.sess.Ask(t.Context(), "Allow git push?", 30*time.Second)
		res <- askResult{dec, err}
	}()
	d.in.expect(`{"v":1,"t":"present","id":"r1","sum":"Allow git push?","opt":["allow","deny"],"ttl":30000}`)

	steps := []struct{ send, reply string }{
		{`{"v":1,"t":"frobnicate_the_widget","id":"r1"}`, `{"v":1,"t":"error","code":"bad_message"}`},
		{`{"v":1,"t":"answer","id":"r1","ch":"maybe"}`, `{"v":1,"t":"error","code":"bad_message"}`},
		{`{"v":1,"t":"answer","id":"r1","ch":"allow","ch":"deny"}`, `{"v":1,"t":"error","code":"bad_message"}`},
		{`{"v":1,"t":"answer","id":"r1","ch":"ALLOW","x":"pad to fit an id"}`, `{"v":1,"t":"error","id":"r1","code":"bad_message"}`},
		{`{"v":1,"t":"present","id":"r1","sum":"Allow?","opt":["allow","deny"],"ttl":9}`, `{"v":1,"t":"error","id":"r1","code":"bad_message"}`},
		{`{"v":1,"t":"resolved","id":"r1","r":"answered","pad":"xxxxxx"}`, `{"v":1,"t":"error","id":"r1","code":"bad_message"}`},
		{`{"v":1,"t":"key_event","slot":3,"event":"press","seq":18}`, `{"v":1,"t":"error","code":"unsupported_profile"}`},
		{`{"v":2,"t":"answer","id":"r1","ch":"allow","future":1}`, `{"v":1,"t":"error","code":"unsupported_version"}`},
		{`{"v":1,"t":"answer","id":"other-request","ch":"allow"}`, `{"v":1,"t":"error","code":"unknown_request"}`},
	}
	for _, s := range steps {
		write(t, d.conn, s.send+"\n")
		d.in.expect(s.reply)
	}
	// Silence, proven by the next reply: a short unknown type, an error
	// (even a malformed one), a stray LF.
	write(t, d.conn, `{"v":1,"t":"zap"}`+"\n"+`{"v":1,"t":"error","code":"busy","id":"r1"}`+"\n"+
		`{"v":1,"t":"error","code":"what","id":"r1","pad":"xxxxxxxxxxxxxxxxxxxxxxxx"}`+"\n\n")
	write(t, d.conn, `{"v":1,"t":"frobnicate_the_widget","id":"r1"}`+"\n")
	d.in.expect(`{"v":1,"t":"error","code":"bad_message"}`)
	select {
	case r := <-res:
		t.Fatalf("refused input decided the ask: %+v", r)
	default:
	}

	// The real answer; its resends after resolution get the same resolved.
	write(t, d.conn, `{"v":1,"t":"answer","id":"r1","ch":"deny"}`+"\n")
	d.in.expect(`{"v":1,"t":"resolved","id":"r1","r":"answered"}`)
	wantDecision(t, res, DecisionDeny)
	write(t, d.conn, `{"v":1,"t":"answer","id":"r1","ch":"deny"}`+"\n")
	d.in.expect(`{"v":1,"t":"resolved","id":"r1","r":"answered"}`)
	write(t, d.conn, `{"v":1,"t":"answer","id":"r1","ch":"allow"}`+"\n")
	d.in.expect(`{"v":1,"t":"resolved","id":"r1","r":"answered"}`)
}

// On expiry the host sends resolved(expired); an answer after that gets it
// again; the next request is independent.
func TestSessionAnswerAfterExpiry(t *testing.T) {
	d := startRawDevice(t)
	res := make(chan askResult, 1)
	go func() {
		dec, err := d.sess.Ask(t.Context(), "Allow git push?", 5*time.Second)
		res <- askResult{dec, err}
	}()
	d.in.next() // present r1
	d.clk.Advance(5 * time.Second)
	// The pipe is synchronous: read the resolved before the ask's result.
	d.in.expect(`{"v":1,"t":"resolved","id":"r1","r":"expired"}`)
	wantDecision(t, res, DecisionExpired)
	write(t, d.conn, `{"v":1,"t":"answer","id":"r1","ch":"allow"}`+"\n")
	d.in.expect(`{"v":1,"t":"resolved","id":"r1","r":"expired"}`)
}

func TestOpenStreamFailures(t *testing.T) {
	cases := []struct {
		name, send string
		close      bool
		want       func(error) bool
	}{
		{"bad Device Info", `{"protocol":"nexting-device"}` + "\n", false, func(err error) bool { return CodeOf(err) == CodeBadMessage }},
		{"no approval/1", strings.Replace(DefaultSimDeviceInfo, `"approval/1",`, ``, 1) + "\n", false,
			func(err error) bool { return CodeOf(err) == CodeUnsupportedProfile }},
		{"closed before Device Info", `{"protocol"`, true, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := pipePair(t)
			w := writeAsync(b, c.send)
			go func() {
				<-w
				if c.close {
					b.Close()
				}
			}()
			s, err := OpenStream(t.Context(), a, SessionConfig{})
			if err == nil || !c.want(err) {
				t.Fatalf("OpenStream: %v %v", s, err)
			}
			// OpenStream closed its end.
			if _, err := a.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("end not closed: %v", err)
			}
		})
	}
	t.Run("context ends first", func(t *testing.T) {
		a, _ := pipePair(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := OpenStream(ctx, a, SessionConfig{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
}

// lateClock is a fake clock whose timers never fire: a deadline passes
// while its timer is late.
type lateClock struct{ *clock.Fake }

func (lateClock) AfterFunc(time.Duration, func()) clock.Timer { return lateTimer{} }

type lateTimer struct{}

func (lateTimer) C() <-chan time.Time { return nil }
func (lateTimer) Stop() bool          { return true }

// A context that ends after the TTL has passed, before the session's timer
// fired: the ask ends expired (the deadline came first) and the session
// goes on; it never panics with its lock held.
func TestSessionCancelAfterALateDeadline(t *testing.T) {
	hostEnd, devEnd := transports[0].pair(t)
	clk := lateClock{clock.NewFake(t0)}
	sim, err := NewSim(nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := ServeSim(devEnd, sim, clock.NewFake(t0))
	defer dev.Close()
	sess, err := OpenStream(t.Context(), hostEnd, SessionConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan askResult, 1)
	go func() {
		d, err := sess.Ask(ctx, "Allow git push?", time.Second)
		res <- askResult{d, err}
	}()
	waitDevice(t, dev, "r1", pendingID("r1"))
	clk.Advance(2 * time.Second) // the TTL passes; its timer does not fire
	cancel()
	wantDecision(t, res, DecisionExpired)
	next := make(chan askResult, 1)
	go func() {
		d, err := sess.Ask(t.Context(), "next", time.Minute)
		next <- askResult{d, err}
	}()
	waitDevice(t, dev, "r2", pendingID("r2"))
	dev.Press(ChoiceAllow)
	wantDecision(t, next, DecisionAllow)
}
