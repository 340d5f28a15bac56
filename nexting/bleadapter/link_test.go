package bleadapter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/nexting"
)

// fakePeripheral is a stack that has connected to a peripheral: it
// records what the Link asks of it, can fail or hold any call, and
// notifies through the callback the Link gave it whenever the test says —
// also after unsubscribe, as a stack's goroutine may.
type fakePeripheral struct {
	mu       sync.Mutex
	mtuVal   int
	mtuErr   error
	info     []byte
	infoErr  error
	writeErr error
	discErr  error
	writes   [][]byte
	fn       func([]byte) // kept after unsubscribe
	counts   map[string]int
	onWrite  func(chunk []byte) // runs inside write (the sim peripheral)
	hold     chan struct{}      // when set, mtu, readInfo and write wait for it to close
	entered  chan string        // a held call began

	drop     chan struct{}
	dropOnce sync.Once
}

func newFake() *fakePeripheral {
	return &fakePeripheral{mtuVal: 247, counts: map[string]int{}, drop: make(chan struct{}), entered: make(chan string, 16)}
}

func (f *fakePeripheral) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// begin counts op and waits while calls are held.
func (f *fakePeripheral) begin(op string) {
	f.mu.Lock()
	f.counts[op]++
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		f.entered <- op
		<-hold
	}
}

func (f *fakePeripheral) mtu() (int, error) {
	f.begin("mtu")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mtuVal, f.mtuErr
}

func (f *fakePeripheral) readInfo(buf []byte) (int, error) {
	f.begin("readInfo")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.infoErr != nil {
		return 0, f.infoErr
	}
	copy(buf, f.info) // tinygo's Read: copy what fits, return the whole length
	return len(f.info), nil
}

func (f *fakePeripheral) write(chunk []byte) error {
	f.begin("write")
	f.mu.Lock()
	if err := f.writeErr; err != nil {
		f.writeErr = nil
		f.mu.Unlock()
		return err
	}
	f.writes = append(f.writes, bytes.Clone(chunk))
	on := f.onWrite
	f.mu.Unlock()
	if on != nil {
		on(chunk)
	}
	return nil
}

func (f *fakePeripheral) subscribe(fn func([]byte)) error {
	f.begin("subscribe")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
	return nil
}

func (f *fakePeripheral) unsubscribe() error { f.begin("unsubscribe"); return nil }

func (f *fakePeripheral) disconnect() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts["disconnect"]++
	return f.discErr
}

func (f *fakePeripheral) dropped() <-chan struct{} { return f.drop }

func (f *fakePeripheral) release() { f.begin("release") }

// notify delivers one notification the way the stack does.
func (f *fakePeripheral) notify(p []byte) {
	f.mu.Lock()
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		fn(p)
	}
}

func (f *fakePeripheral) allWrites() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.writes...)
}

// remoteDrop is the stack reporting the link gone.
func (f *fakePeripheral) remoteDrop() { f.dropOnce.Do(func() { close(f.drop) }) }

// newTestLink returns a Link over f, disconnected and drained at cleanup.
func newTestLink(t *testing.T, f *fakePeripheral) *Link {
	t.Helper()
	l := newLink(f)
	t.Cleanup(func() {
		l.Disconnect()
		l.calls.Wait()
	})
	return l
}

// collector records delivered notifications.
type collector struct {
	mu  sync.Mutex
	got []string
}

func (c *collector) add(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, string(p))
}

func (c *collector) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The MTU the stack reports, and the chunk size it gives: unknown or
// impossible values fall back to 23 (chunks of 20), never below.
func TestLinkMTU(t *testing.T) {
	for _, c := range []struct {
		mtu   int
		err   error
		want  int
		chunk int
	}{
		{23, nil, 23, 20},
		{185, nil, 185, 182},
		{247, nil, 247, 244},
		{512, nil, 512, 509},
		{517, nil, 517, 512},
		{65535, nil, 65535, 512},
		{22, nil, 23, 20},
		{0, nil, 23, 20},
		{-1, nil, 23, 20},
		{247, errors.New("org.freedesktop.DBus.Error.InvalidArgs: No such property 'MTU'"), 23, 20},
	} {
		f := newFake()
		f.mtuVal, f.mtuErr = c.mtu, c.err
		l := newTestLink(t, f)
		got := l.MTU()
		chunk, err := nexting.BLEChunkSize(got)
		if got != c.want || err != nil || chunk != c.chunk {
			t.Errorf("stack MTU %d, %v: MTU %d (chunk %d, %v); want %d (chunk %d)", c.mtu, c.err, got, chunk, err, c.want, c.chunk)
		}
	}
}

// Once the link is down the MTU is the minimum, without asking the stack.
func TestLinkMTUWhenDown(t *testing.T) {
	f := newFake()
	l := newTestLink(t, f)
	l.Disconnect()
	if got := l.MTU(); got != nexting.MinATTMTU || f.count("mtu") != 0 {
		t.Fatalf("MTU %d after %d stack calls", got, f.count("mtu"))
	}
}

// Device Info comes back whole at any length up to 4096 bytes, whatever
// the MTU (the stack does the long read); longer is refused, never cut.
func TestLinkReadDeviceInfo(t *testing.T) {
	for _, n := range []int{0, 1, 19, 20, 22, 182, 244, 509, 510, 600, 4095, 4096, 4097, 9000} {
		f := newFake()
		f.mtuVal = 23
		f.info = bytes.Repeat([]byte("x"), n)
		for i := range f.info {
			f.info[i] = byte('a' + i%26)
		}
		l := newTestLink(t, f)
		got, err := l.ReadDeviceInfo()
		switch {
		case n <= nexting.MaxDeviceInfoBytes && (err != nil || !bytes.Equal(got, f.info)):
			t.Errorf("%d bytes: %d bytes back, %v", n, len(got), err)
		case n > nexting.MaxDeviceInfoBytes && (err == nil || !strings.Contains(err.Error(), "longer than 4096")):
			t.Errorf("%d bytes: %d bytes back, %v; want refused", n, len(got), err)
		}
	}
	f := newFake()
	f.infoErr = errors.New("ATT error 0x02 (Read Not Permitted)")
	l := newTestLink(t, f)
	if _, err := l.ReadDeviceInfo(); !errors.Is(err, f.infoErr) {
		t.Fatalf("read error %v; want it wrapped", err)
	}
}

// A failed write returns the stack's error and leaves the link up (the
// connection above decides to disconnect); chunks reach the stack as
// given, in order.
func TestLinkWrite(t *testing.T) {
	f := newFake()
	l := newTestLink(t, f)
	stackErr := errors.New("ATT error 0x0f (Insufficient Encryption)")
	f.writeErr = stackErr
	if err := l.WriteDownlink([]byte("a")); !errors.Is(err, stackErr) {
		t.Fatalf("write error %v; want the stack's", err)
	}
	if isClosed(l.Disconnected()) {
		t.Fatal("a failed write took the link down")
	}
	for _, c := range []string{"{\"v\":1", ",\"t\":\"status\"}\n"} {
		if err := l.WriteDownlink([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprintf("%q", f.writes); got != `["{\"v\":1" ",\"t\":\"status\"}\n"]` {
		t.Fatalf("writes %s", got)
	}
}

// Notifications are delivered in order until Disconnect; after it, none,
// also from a stack goroutine that still calls back.
func TestLinkNoNotificationsAfterDisconnect(t *testing.T) {
	f := newFake()
	l := newTestLink(t, f)
	var c collector
	if err := l.SubscribeUplink(c.add); err != nil {
		t.Fatal(err)
	}
	if err := l.SubscribeUplink(c.add); err == nil {
		t.Fatal("subscribed twice")
	}
	f.notify([]byte("one"))
	f.notify([]byte("two"))
	if err := l.Disconnect(); err != nil {
		t.Fatal(err)
	}
	f.notify([]byte("late"))
	if got := c.all(); fmt.Sprint(got) != "[one two]" {
		t.Fatalf("delivered %q", got)
	}
	if f.count("unsubscribe") != 1 || f.count("disconnect") != 1 || f.count("release") != 1 {
		t.Fatalf("stack calls %v", f.counts)
	}
}

// Notifications racing Disconnect: whatever was delivered was delivered
// before Disconnect returned; nothing after.
func TestLinkNotificationsRacingDisconnect(t *testing.T) {
	for range 50 {
		f := newFake()
		l := newTestLink(t, f)
		var c collector
		if err := l.SubscribeUplink(c.add); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 50 {
					f.notify(fmt.Appendf(nil, "%d.%d", g, i))
				}
			})
		}
		l.Disconnect()
		n := len(c.all())
		wg.Wait()
		if m := len(c.all()); m != n {
			t.Fatalf("%d notifications delivered after Disconnect returned", m-n)
		}
	}
}

// Disconnect is idempotent, also called at once from many goroutines: the
// stack is told and released once; the first call returns its error.
func TestLinkDisconnectIdempotent(t *testing.T) {
	f := newFake()
	f.discErr = errors.New("org.bluez.Error.Failed: Not Connected")
	l := newTestLink(t, f)
	if err := l.Disconnect(); !errors.Is(err, f.discErr) {
		t.Fatalf("first Disconnect: %v", err)
	}
	if err := l.Disconnect(); err != nil {
		t.Fatalf("second Disconnect: %v", err)
	}

	f = newFake()
	l = newTestLink(t, f)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { l.Disconnect() })
	}
	wg.Wait()
	if !isClosed(l.Disconnected()) || f.count("disconnect") != 1 || f.count("release") != 1 || f.count("unsubscribe") != 0 {
		t.Fatalf("stack calls %v", f.counts)
	}
}

// When the stack reports the link gone, Disconnected closes, every method
// answers ErrDisconnected without asking the stack, and the stack is
// released once; a later Disconnect is a no-op.
func TestLinkRemoteDrop(t *testing.T) {
	f := newFake()
	l := newTestLink(t, f)
	var c collector
	if err := l.SubscribeUplink(c.add); err != nil {
		t.Fatal(err)
	}
	f.notify([]byte("before"))
	f.remoteDrop()
	<-l.Disconnected()
	f.notify([]byte("after"))
	if err := l.WriteDownlink([]byte("x")); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("write after drop: %v", err)
	}
	if _, err := l.ReadDeviceInfo(); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("read after drop: %v", err)
	}
	<-l.watchDone // the shutdown has run
	if err := l.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.all()) != "[before]" || f.count("write") != 0 || f.count("readInfo") != 0 ||
		f.count("unsubscribe") != 1 || f.count("disconnect") != 1 || f.count("release") != 1 {
		t.Fatalf("delivered %q; stack calls %v", c.all(), f.counts)
	}
}

// A stack call that does not return (BlueZ slow to fail it) does not hold
// up the Link's method once the link is down, whoever took it down.
func TestLinkReturnsPromptlyWhenDown(t *testing.T) {
	for _, remote := range []bool{false, true} {
		for _, op := range []string{"write", "readInfo", "mtu"} {
			t.Run(fmt.Sprintf("%s/remote=%v", op, remote), func(t *testing.T) {
				f := newFake()
				f.hold = make(chan struct{})
				l := newTestLink(t, f)
				done := make(chan error, 1)
				go func() {
					switch op {
					case "write":
						done <- l.WriteDownlink([]byte("x"))
					case "readInfo":
						_, err := l.ReadDeviceInfo()
						done <- err
					case "mtu":
						if m := l.MTU(); m != nexting.MinATTMTU {
							done <- fmt.Errorf("MTU %d", m)
						} else {
							done <- ErrDisconnected
						}
					}
				}()
				if got := <-f.entered; got != op {
					t.Fatalf("stack call %s", got)
				}
				if remote {
					f.remoteDrop()
				} else {
					go l.Disconnect()
				}
				if err := <-done; !errors.Is(err, ErrDisconnected) {
					t.Fatalf("%s returned %v", op, err)
				}
				// The abandoned call ends when the stack lets it go; so
				// does the release, which this fake holds too.
				close(f.hold)
			})
		}
	}
}

// ---- the Link under a Session, over a simulated peripheral ----

// simPeripheral makes f a nexting device: downlink writes are reassembled
// and handled by a Sim at once, its frames notified in chunks of the MTU.
type simPeripheral struct {
	*fakePeripheral
	mu      sync.Mutex
	sim     *nexting.Sim
	re      *nexting.BLEReassembler
	changed chan struct{}
}

var t0 = time.Unix(1_700_000_000, 0)

func newSimPeripheral(t *testing.T, mtu int) *simPeripheral {
	sim, err := nexting.NewSim(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &simPeripheral{fakePeripheral: newFake(), sim: sim, re: nexting.NewBLEReassembler(sim.NewFramer()), changed: make(chan struct{}, 1)}
	s.mtuVal, s.info = mtu, sim.DeviceInfo()
	s.onWrite = func(chunk []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, r := range s.re.Chunk(chunk) {
			s.uplink(s.sim.Receive(t0, r))
		}
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	return s
}

// uplink notifies frames, cut to the chunk size (called under mu).
func (s *simPeripheral) uplink(frames [][]byte) {
	size, _ := nexting.BLEChunkSize(s.mtuVal)
	for _, f := range frames {
		for _, c := range nexting.BLESplit(f, size) {
			s.notify(c)
		}
	}
}

func (s *simPeripheral) waitPending(t *testing.T) string {
	for {
		s.mu.Lock()
		v := s.sim.View(t0)
		s.mu.Unlock()
		if v.State == nexting.DevicePending {
			return v.Summary
		}
		<-s.changed
	}
}

func (s *simPeripheral) press(c nexting.Choice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uplink(s.sim.Press(t0, c))
}

// nexting.OpenBLE over a Link: Device Info read, negotiation, a summary
// long enough to take several chunks at every MTU, allow and deny; then
// the peripheral drops the link and the session ends.
func TestLinkUnderASession(t *testing.T) {
	for _, mtu := range []int{23, 185, 247, 512} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			p := newSimPeripheral(t, mtu)
			l := newTestLink(t, p.fakePeripheral)
			s, err := nexting.OpenBLE(t.Context(), l, nexting.SessionConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			summary := "Run: " + strings.Repeat("git push origin main && ", 9)[:200]
			for _, c := range []nexting.Choice{nexting.ChoiceAllow, nexting.ChoiceDeny} {
				got := make(chan nexting.Decision, 1)
				go func() {
					d, err := s.Ask(t.Context(), summary, 30*time.Second)
					if err != nil {
						t.Error(err)
					}
					got <- d
				}()
				if shown := p.waitPending(t); shown != summary {
					t.Fatalf("the device shows %q", shown)
				}
				p.press(c)
				if d := <-got; string(d) != string(c) {
					t.Fatalf("pressed %s, decided %s", c, d)
				}
			}
			size, _ := nexting.BLEChunkSize(mtu)
			for _, w := range p.allWrites() {
				if len(w) > size {
					t.Fatalf("a write of %d bytes at MTU %d", len(w), mtu)
				}
			}
			p.remoteDrop()
			<-s.Done()
			if d, _ := s.Ask(t.Context(), "after", time.Second); d != nexting.DecisionLost {
				t.Fatalf("after the drop: %s", d)
			}
		})
	}
}
