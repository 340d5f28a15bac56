package nexting

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The chunk sizes of ATT MTUs 23, 185, 247 and 512: 20, 182, 244, 509.
var bleMTUs = []struct{ mtu, chunk int }{{23, 20}, {185, 182}, {247, 244}, {512, 509}}

func TestBLEChunkSize(t *testing.T) {
	for _, c := range append(bleMTUs, struct{ mtu, chunk int }{517, 512}, struct{ mtu, chunk int }{65535, 512}) {
		if got, err := BLEChunkSize(c.mtu); err != nil || got != c.chunk {
			t.Errorf("MTU %d: %d %v, want %d", c.mtu, got, err, c.chunk)
		}
	}
	for _, mtu := range []int{22, 20, 3, 0, -1} {
		if _, err := BLEChunkSize(mtu); err == nil {
			t.Errorf("MTU %d accepted", mtu)
		}
	}
	if got := BLESplit(nil, 20); len(got) != 0 {
		t.Errorf("empty frame split into %q", got)
	}
}

// validStream returns every valid published vector frame (LF included),
// in a fixed order.
func validStream(t testing.TB) [][]byte {
	t.Helper()
	vs := loadVectors(t)
	names := make([]string, 0, len(vs))
	for n := range vs {
		if n != "device-info-v1.json" { // Device Info is read, not framed
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out [][]byte
	for _, n := range names {
		for _, v := range vs[n].Valid {
			out = append(out, []byte(v.Wire))
		}
	}
	if len(out) < 40 {
		t.Fatalf("only %d valid frames", len(out))
	}
	return out
}

func frameStrings(rs []Result) ([]string, []Code) {
	var fs []string
	var codes []Code
	for _, r := range rs {
		if r.Err != nil {
			codes = append(codes, r.Err.Code)
			continue
		}
		fs = append(fs, string(r.Frame)+"\n")
	}
	return fs, codes
}

func bytesToStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// Every valid frame, cut to each MTU's chunk size, reassembles to itself;
// chunks never exceed the size and never mix two frames.
func TestBLESplitReassembleAtEachMTU(t *testing.T) {
	sent := validStream(t)
	for _, m := range bleMTUs {
		t.Run(fmt.Sprint(m.mtu), func(t *testing.T) {
			size, _ := BLEChunkSize(m.mtu)
			re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
			var rs []Result
			for _, f := range sent {
				chunks := BLESplit(f, size)
				if want := (len(f) + size - 1) / size; len(chunks) != want {
					t.Fatalf("%d chunks for %d bytes, want %d", len(chunks), len(f), want)
				}
				for i, c := range chunks {
					if len(c) > size || len(c) == 0 || (i < len(chunks)-1 && strings.Contains(string(c), "\n")) {
						t.Fatalf("bad chunk %q", c)
					}
					rs = append(rs, re.Chunk(c)...)
				}
			}
			got, codes := frameStrings(rs)
			if len(codes) != 0 || !slices.Equal(got, bytesToStrings(sent)) {
				t.Fatalf("reassembled %d frames, errors %v", len(got), codes)
			}
		})
	}
}

// A stream cut into two chunks at every byte offset (and into three at
// every pair of offsets of a shorter stream) yields the same frames.
func TestBLEReassemblerSplitsAtEveryOffset(t *testing.T) {
	stream := fPresent + "\n" + fAnswer + "\n" + fStatus + "\n"
	want := []string{fPresent + "\n", fAnswer + "\n", fStatus + "\n"}
	run := func(cuts ...int) {
		re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
		var rs []Result
		prev := 0
		for _, c := range append(cuts, len(stream)) {
			rs = append(rs, re.Chunk([]byte(stream[prev:c]))...)
			prev = c
		}
		if got, codes := frameStrings(rs); len(codes) != 0 || !slices.Equal(got, want) {
			t.Fatalf("cuts %v: %q %v", cuts, got, codes)
		}
	}
	for i := 0; i <= len(stream); i++ {
		run(i)
	}
	short := fAnswer + "\n" + fAnswer + "\n"
	stream, want = short, []string{fAnswer + "\n", fAnswer + "\n"}
	for i := 0; i <= len(short); i++ {
		for j := i; j <= len(short); j++ {
			run(i, j)
		}
	}
}

// chunked is a frame stream cut per frame at one chunk size, remembering
// which frame each chunk belongs to and whether it ends that frame.
type chunked struct {
	frames []string
	chunks [][]byte
	owner  []int
	last   []bool
}

func chunkStream(frames [][]byte, size int) chunked {
	c := chunked{frames: bytesToStrings(frames)}
	for i, f := range frames {
		parts := BLESplit(f, size)
		for j, p := range parts {
			c.chunks = append(c.chunks, p)
			c.owner = append(c.owner, i)
			c.last = append(c.last, j == len(parts)-1)
		}
	}
	return c
}

// approvalFrames is uplink and downlink approval traffic: what a fault on
// a BLE link would damage.
func approvalFrames() [][]byte {
	var out [][]byte
	for i := range 6 {
		id := fmt.Sprintf("r%d", i+1)
		for _, m := range []Message{
			Present{ID: id, Summary: "Allow git push?", TTLMillis: 30000},
			Answer{ID: id, Choice: ChoiceAllow},
			Answer{ID: id, Choice: ChoiceDeny},
			Resolved{ID: id, Reason: ReasonAnswered},
			ErrorMessage{ID: id, Code: CodeUnknownRequest},
			Status{Agents: []Agent{{Slot: 0, State: AgentWorking, Label: "build"}}},
		} {
			f, err := Encode(m)
			if err != nil {
				panic(err)
			}
			out = append(out, f)
		}
	}
	return out
}

// A loss the link reports (Lost) drops exactly the frame it hit — and the
// next one when the lost chunk carried the LF, since resynchronizing skips
// through the next LF — and nothing else; a damaged frame is never
// delivered.
func TestBLEReportedLoss(t *testing.T) {
	for _, m := range bleMTUs {
		c := chunkStream(approvalFrames(), m.chunk)
		for k := range c.chunks {
			re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
			var rs []Result
			for i, ch := range c.chunks {
				if i == k {
					rs = append(rs, re.Lost()...)
					continue
				}
				rs = append(rs, re.Chunk(ch)...)
			}
			got, codes := frameStrings(rs)
			j := c.owner[k]
			want := slices.Clone(c.frames)
			drop := 1
			if c.last[k] && j+1 < len(want) {
				drop = 2
			}
			want = slices.Delete(want, j, j+drop)
			if !slices.Equal(got, want) || !slices.Equal(codes, []Code{CodeBadMessage}) {
				t.Fatalf("MTU %d, chunk %d lost: %d frames, codes %v; want %d frames", m.mtu, k, len(got), codes, len(want))
			}
		}
	}
}

// A loss or a duplicate the link does not report damages the frames it
// touches; the decoder refuses every damaged frame of this traffic, and
// framing is back in step two frames later.
func TestBLEUnreportedDropsAndDuplicates(t *testing.T) {
	for _, m := range bleMTUs {
		c := chunkStream(approvalFrames(), m.chunk)
		for k := range c.chunks {
			for _, dup := range []bool{false, true} {
				re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
				var rs []Result
				for i, ch := range c.chunks {
					if i != k || dup {
						rs = append(rs, re.Chunk(ch)...)
					}
					if i == k && dup {
						rs = append(rs, re.Chunk(ch)...)
					}
				}
				got, _ := frameStrings(rs)
				for _, f := range got {
					if _, err := DecodeFrame([]byte(f)); err == nil && !slices.Contains(c.frames, f) {
						t.Fatalf("MTU %d chunk %d dup=%v: damaged frame accepted: %s", m.mtu, k, dup, f)
					}
				}
				// Every frame from the second after the damaged one is intact.
				tail := c.frames[min(c.owner[k]+2, len(c.frames)):]
				if len(got) < len(tail) || !slices.Equal(got[len(got)-len(tail):], tail) {
					t.Fatalf("MTU %d chunk %d dup=%v: framing not back in step", m.mtu, k, dup)
				}
			}
		}
	}
}

// A disconnect mid-frame clears framing: the partial frame is gone and
// the next chunk starts a fresh frame.
func TestBLEDisconnectMidFrame(t *testing.T) {
	frames := approvalFrames()
	for cut := 1; cut < len(frames[0]); cut++ {
		re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
		rs := re.Chunk(frames[0][:cut])
		re.Disconnect()
		for _, f := range frames {
			rs = append(rs, re.Chunk(f)...)
		}
		if got, codes := frameStrings(rs); len(codes) != 0 || !slices.Equal(got, bytesToStrings(frames)) {
			t.Fatalf("cut %d: %d frames, codes %v", cut, len(got), codes)
		}
	}
	// A disconnect during resynchronization ends it too.
	re := NewBLEReassembler(&Framer{max: MaxFrameBytes})
	re.Chunk(frames[0][:5])
	re.Lost()
	re.Disconnect()
	if got, _ := frameStrings(re.Chunk(frames[1])); !slices.Equal(got, []string{string(frames[1])}) {
		t.Fatalf("after disconnect: %q", got)
	}
}

// ---- a fake BLE link: the host's BLELink wired to a simulated peripheral ----

// fakeLink is an in-memory GATT link to a peripheral running a Sim: each
// downlink write is reassembled and handled at once; the Sim's frames are
// cut to the MTU's chunk size and notified in order. The peripheral has no
// clock: these tests need no resends or local TTL.
type fakeLink struct {
	mtu int

	mu       sync.Mutex // serializes the peripheral and the notifications
	sim      *Sim
	re       *BLEReassembler
	notifyFn func([]byte)
	writeErr error // the next WriteDownlink fails
	writes   int

	down     chan struct{}
	downOnce sync.Once
	changed  chan struct{} // cap 1
}

func newFakeLink(t *testing.T, mtu int) *fakeLink {
	sim, err := NewSim(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeLink{mtu: mtu, sim: sim, re: NewBLEReassembler(sim.NewFramer()),
		down: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (l *fakeLink) MTU() int { return l.mtu }

func (l *fakeLink) ReadDeviceInfo() ([]byte, error) {
	select {
	case <-l.down:
		return nil, ErrLinkLost
	default:
	}
	return l.sim.DeviceInfo(), nil
}

func (l *fakeLink) SubscribeUplink(notify func([]byte)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notifyFn = notify
	return nil
}

func (l *fakeLink) WriteDownlink(chunk []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.down:
		return ErrLinkLost
	default:
	}
	if size, _ := BLEChunkSize(l.mtu); len(chunk) > size {
		return fmt.Errorf("chunk of %d bytes over %d", len(chunk), size)
	}
	if l.writeErr != nil {
		err := l.writeErr
		l.writeErr = nil
		return err
	}
	l.writes++
	for _, r := range l.re.Chunk(chunk) {
		l.uplink(l.sim.Receive(t0, r))
	}
	l.signal()
	return nil
}

// uplink notifies frames, cut to the chunk size (called under mu).
func (l *fakeLink) uplink(frames [][]byte) {
	size, _ := BLEChunkSize(l.mtu)
	for _, f := range frames {
		for _, c := range BLESplit(f, size) {
			if l.notifyFn != nil {
				l.notifyFn(c)
			}
		}
	}
}

func (l *fakeLink) Disconnect() error {
	l.downOnce.Do(func() {
		l.mu.Lock()
		l.re.Disconnect()
		l.sim.Reset()
		l.notifyFn = nil
		l.mu.Unlock()
		close(l.down)
		l.signal()
	})
	return nil
}

func (l *fakeLink) Disconnected() <-chan struct{} { return l.down }

func (l *fakeLink) press(c Choice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.uplink(l.sim.Press(t0, c))
}

func (l *fakeLink) view() SimView {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sim.View(t0)
}

func (l *fakeLink) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *fakeLink) wait(t *testing.T, cond func(SimView) bool) {
	t.Helper()
	for !cond(l.view()) {
		<-l.changed
	}
}

func openBLE(t *testing.T, l *fakeLink) *Session {
	t.Helper()
	s, err := OpenBLE(t.Context(), l, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func askAsync(ctx context.Context, s *Session, summary string) <-chan askResult {
	ch := make(chan askResult, 1)
	go func() {
		d, err := s.Ask(ctx, summary, 30*time.Second)
		ch <- askResult{d, err}
	}()
	return ch
}

// The whole approval over the fake link at every MTU, with a summary long
// enough to need several chunks even at 244 bytes.
func TestBLESessionAllowDeny(t *testing.T) {
	sum := strings.Repeat("Allow git push --force to origin/main? ", 7)[:240]
	for _, m := range bleMTUs {
		t.Run(fmt.Sprint(m.mtu), func(t *testing.T) {
			l := newFakeLink(t, m.mtu)
			s := openBLE(t, l)
			for i, c := range []Choice{ChoiceAllow, ChoiceDeny} {
				res := askAsync(t.Context(), s, sum)
				id := fmt.Sprintf("r%d", i+1)
				l.wait(t, func(v SimView) bool { return v.State == DevicePending && v.ID == id })
				if v := l.view(); v.Summary != sum {
					t.Fatalf("summary %q", v.Summary)
				}
				l.press(c)
				wantDecision(t, res, Decision(c))
				l.wait(t, func(v SimView) bool { return v.State == DeviceIdle })
			}
		})
	}
}

func TestBLESessionLinkLoss(t *testing.T) {
	// The peripheral goes away.
	l := newFakeLink(t, 23)
	s := openBLE(t, l)
	res := askAsync(t.Context(), s, "Allow?")
	l.wait(t, func(v SimView) bool { return v.State == DevicePending })
	l.Disconnect()
	wantDecision(t, res, DecisionLost)
	<-s.Done()
	if !errors.Is(s.Err(), ErrLinkLost) {
		t.Fatalf("err %v", s.Err())
	}

	// A downlink write fails: never retried, the link is dropped.
	l = newFakeLink(t, 23)
	s = openBLE(t, l)
	l.mu.Lock()
	l.writeErr = errors.New("ATT error 0x0e")
	l.mu.Unlock()
	res = askAsync(t.Context(), s, "Allow?")
	wantDecision(t, res, DecisionLost)
	<-l.Disconnected()
	if v := l.view(); v.State != DeviceIdle || l.writes != 0 {
		t.Fatalf("peripheral after a failed write: %+v, %d writes", v, l.writes)
	}

	// Device Info unreadable.
	l = newFakeLink(t, 23)
	l.Disconnect()
	if _, err := OpenBLE(t.Context(), l, SessionConfig{}); err == nil {
		t.Fatal("opened a dead link")
	}
}

// The uplink callback never blocks the BLE stack: notifications go into a
// bounded queue, and an overflow drops everything until the reader has
// emptied the queue, leaving one loss marker. The reader then reports one
// loss after the whole frames that fit, and resynchronizes at the next LF.
func TestBLEConnNotificationOverflow(t *testing.T) {
	l := newFakeLink(t, 23)
	c := newBLEConn(l, &Framer{max: MaxFrameBytes}) // not started: nothing drains the queue
	c.maxIn = 100
	enc := func(id string) []byte {
		f, _ := Encode(Answer{ID: id, Choice: ChoiceAllow}) // 44 bytes: chunks of 20, 20, 4
		return f
	}
	push := func(id string) {
		for _, ch := range BLESplit(enc(id), 20) {
			c.notify(ch)
		}
	}
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		push(id)
	}
	var shape []int
	for _, n := range c.in {
		if n.lost {
			shape = append(shape, -1)
		} else {
			shape = append(shape, len(n.chunk))
		}
	}
	// r1 and r2 fit (88 bytes); r3's first chunk does not: one marker,
	// and the rest is dropped, also r3's 4-byte chunk that would fit.
	if !slices.Equal(shape, []int{20, 20, 4, 20, 20, 4, -1}) {
		t.Fatalf("queue %v", shape)
	}
	c.start()
	defer c.Close()
	for _, want := range []string{"r1", "r2"} {
		if r := <-c.Results(); r.Err != nil || string(r.Frame)+"\n" != string(enc(want)) {
			t.Fatalf("want %s, got %+v", want, r)
		}
	}
	if r := <-c.Results(); r.Err == nil || r.Err.Code != CodeBadMessage || r.Err.Size != 0 {
		t.Fatalf("want the loss report, got %+v", r)
	}
	// The queue is empty again; resynchronizing swallows r5 (the rest of
	// a damaged frame cannot be told from it), r6 comes out whole.
	push("r5")
	push("r6")
	if r := <-c.Results(); r.Err != nil || string(r.Frame)+"\n" != string(enc("r6")) {
		t.Fatalf("after the overflow: %+v", r)
	}
}
