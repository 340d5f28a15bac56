package nexting

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

// Decision is how an approval ended, as Session.Ask reports it.
type Decision string

const (
	// DecisionAllow: the person pressed allow. The only decision that
	// permits anything.
	DecisionAllow Decision = "allow"
	// DecisionDeny: the person pressed deny.
	DecisionDeny Decision = "deny"
	// DecisionExpired: the TTL ended without an answer.
	DecisionExpired Decision = "expired"
	// DecisionCancelled: the asker's context ended, or the session was
	// closed, before an answer.
	DecisionCancelled Decision = "cancelled"
	// DecisionLost: the device went away (the connection ended) before an
	// answer.
	DecisionLost Decision = "lost"
)

// SessionConfig configures a host Session. The zero value is usable.
type SessionConfig struct {
	// Clock drives the TTLs; nil means the system clock. Tests pass a
	// *clock.Fake.
	Clock Clock
	// MaxMessageBytes and MaxSummaryBytes are the host's own limits (0:
	// the largest); negotiation takes the smaller of these and the
	// device's.
	MaxMessageBytes int
	MaxSummaryBytes int
	// Logger receives protocol diagnostics (codes, types and ids only,
	// never a summary). nil discards them.
	Logger *slog.Logger
}

func (c SessionConfig) host() HostConfig {
	return HostConfig{
		Profiles:        []Profile{ProfileApproval, ProfileStatus}, // what a Session implements
		MaxMessageBytes: c.MaxMessageBytes,
		MaxSummaryBytes: c.MaxSummaryBytes,
	}
}

// Session is the host end of one connection to an approval device: Device
// Info already read and negotiated, the Host state machine, and the
// connection. Ask presents one approval and waits for its Decision; asks
// made while another is shown wait their turn (approval/1 shows one request
// at a time, so a Session never replaces a request). Every method is safe
// for concurrent use.
//
// The session owns one goroutine, which reads the connection: each frame
// is decoded under the negotiation; an answer goes to the Host state
// machine; a refused frame, an unknown type or a message a device may not
// send is answered with an error (Reply: never for an error, never larger
// than what was received), and never counts as an answer. TTL timers run
// on the configured clock. Close, or the end of the connection, ends it.
//
// The action sink of the Host state machine is the waiting Ask itself: the
// device's choice is handed to it under the session's lock, which always
// succeeds, and only then is resolved(answered) sent.
type Session struct {
	conn Conn
	info *DeviceInfo
	neg  *Negotiated
	clk  Clock
	log  *slog.Logger

	mu       sync.Mutex
	host     *Host
	current  *ask   // the ask the host is presenting
	queue    []*ask // asks waiting to be presented, in order
	seq      uint64 // request ids are "r1", "r2", …
	ended    bool
	endAs    Decision // what asks get once ended
	sendErr  error
	timer    Timer
	timerAt  time.Time
	timerGen uint64
	queued   func() // test hook: an ask joined the queue (called under mu)

	done chan struct{} // closed when the reading goroutine has returned
}

type ask struct {
	id       string
	summary  string
	deadline time.Time
	result   chan Decision // cap 1, written once
	decided  bool
}

// OpenStream starts a host session over a byte stream (unix socket, TCP,
// serial port): it reads the Device Info line the device writes first (see
// "Device Info on a stream" in docs/nexting.md), negotiates, and starts the
// session. The session owns rw from then on and closes it (if it is an
// io.Closer) on Close; on error, and when ctx ends before Device Info
// arrived, OpenStream closes it.
func OpenStream(ctx context.Context, rw io.ReadWriter, cfg SessionConfig) (*Session, error) {
	stop := context.AfterFunc(ctx, func() { closeIfCloser(rw) })
	line, rest, err := readInfoLine(rw)
	if !stop() {
		return nil, fmt.Errorf("nexting: reading Device Info: %w", context.Cause(ctx))
	}
	if err == nil {
		var s *Session
		if s, err = newSessionFromInfo(line, cfg, func(neg *Negotiated) (Conn, error) {
			return NewStream(rw, StreamConfig{Framer: neg.NewFramer(), Buffered: rest}), nil
		}); err == nil {
			return s, nil
		}
	}
	closeIfCloser(rw)
	return nil, err
}

func newSessionFromInfo(raw []byte, cfg SessionConfig, open func(*Negotiated) (Conn, error)) (*Session, error) {
	info, err := ParseDeviceInfo(raw)
	if err != nil {
		return nil, fmt.Errorf("nexting: Device Info: %w", err)
	}
	neg, err := Negotiate(cfg.host(), info)
	if err != nil {
		return nil, fmt.Errorf("nexting: negotiation: %w", err)
	}
	conn, err := open(neg)
	if err != nil {
		return nil, err
	}
	return NewSession(conn, info, neg, cfg), nil
}

// NewSession starts a session over conn, whose Device Info info was
// negotiated as neg (its framer must apply neg's limit). OpenStream and
// OpenBLE call it; use it directly for another transport.
func NewSession(conn Conn, info *DeviceInfo, neg *Negotiated, cfg SessionConfig) *Session {
	s := &Session{
		conn: conn,
		info: info,
		neg:  neg,
		clk:  cfg.Clock,
		log:  cfg.Logger,
		host: NewHost(),
		done: make(chan struct{}),
	}
	if s.clk == nil {
		s.clk = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	go s.readLoop()
	return s
}

// Info is the device's Device Info.
func (s *Session) Info() *DeviceInfo { return s.info }

// Negotiated is what host and device agreed on.
func (s *Session) Negotiated() *Negotiated { return s.neg }

// Done is closed when the session has ended (the device went away or
// Close was called).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the connection ended (io.EOF when the device closed it), nil
// while it runs.
func (s *Session) Err() error { return s.conn.Err() }

// Ask presents summary on the device for ttl and waits for the outcome:
// DecisionAllow or DecisionDeny when the person pressed a button (and the
// device was told resolved answered), DecisionExpired when ttl passed,
// DecisionCancelled when ctx ended or the session was closed first,
// DecisionLost when the device went away. The TTL runs from this call; an
// ask that waits behind another is presented with what remains of it.
//
// The error is non-nil only for arguments no device may be shown: a
// summary over the negotiated max_summary_bytes (shorten it deliberately,
// e.g. with FitSummary), one with invalid UTF-8 or U+0000, a ttl outside
// 1 ms…300 s. Only DecisionAllow with a nil error permits anything.
func (s *Session) Ask(ctx context.Context, summary string, ttl time.Duration) (Decision, error) {
	if ttl < time.Millisecond || ttl > MaxTTLMillis*time.Millisecond {
		return "", fmt.Errorf("nexting: ttl %v outside 1ms-%dms", ttl, MaxTTLMillis)
	}
	if err := s.neg.Check(Present{ID: "r", Summary: summary, TTLMillis: 1}); err != nil {
		return "", err
	}
	if e := (Present{ID: "r", Summary: summary, TTLMillis: 1}).validate(); e != nil {
		return "", e
	}
	if ctx.Err() != nil {
		return DecisionCancelled, nil
	}
	now := s.clk.Now()
	a := &ask{summary: summary, deadline: now.Add(ttl), result: make(chan Decision, 1)}
	s.mu.Lock()
	if s.ended {
		d := s.endAs
		s.mu.Unlock()
		return d, nil
	}
	s.queue = append(s.queue, a)
	if s.queued != nil {
		s.queued()
	}
	s.settle(now)
	s.mu.Unlock()

	select {
	case d := <-a.result:
		return d, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.withdraw(s.clk.Now(), a)
	s.mu.Unlock()
	return <-a.result, nil
}

// SetStatus replaces every status slot on the device (status/1; an empty
// list clears them). It fails with unsupported_profile when status/1 was
// not negotiated, with the codec's error for an invalid list, and with
// ErrClosed after the end.
func (s *Session) SetStatus(agents []Agent) error {
	frame, err := s.neg.Encode(Status{Agents: agents})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return ErrClosed
	}
	err = s.conn.Send(frame)
	if err != nil {
		s.sendErr = err
		s.settle(s.clk.Now())
	}
	return err
}

// Close ends the session: waiting asks return DecisionCancelled (the
// disconnect itself clears the device's approval UI), the connection is
// closed and Close waits for the session's goroutine.
func (s *Session) Close() error {
	s.mu.Lock()
	s.end(DecisionCancelled)
	s.mu.Unlock()
	err := s.conn.Close()
	<-s.done
	return err
}

func (s *Session) readLoop() {
	defer close(s.done)
	for r := range s.conn.Results() {
		s.mu.Lock()
		now := s.clk.Now()
		s.receive(now, r)
		s.settle(now)
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.end(DecisionLost)
	s.mu.Unlock()
	_ = s.conn.Close()
}

// receive handles one frame or framing error from the device.
func (s *Session) receive(now time.Time, r Result) {
	if r.Err != nil {
		s.refuse(r.Err)
		return
	}
	m, err := s.neg.Decode(r.Frame)
	if err != nil {
		s.refuse(err)
		return
	}
	switch m := m.(type) {
	case Answer:
		s.apply(now, s.host.Answer(now, m, len(r.Frame)+1))
	case ErrorMessage:
		s.log.Debug("nexting: device reported an error", "code", m.Code, "id", m.ID)
	default:
		s.refuse(wrongDirection(m, len(r.Frame)+1))
	}
}

func (s *Session) refuse(err error) {
	s.log.Debug("nexting: refused a frame from the device", "code", CodeOf(err))
	if m, ok := Reply(err); ok {
		s.send(m)
	}
}

// apply carries out the Host state machine's actions, in order.
func (s *Session) apply(now time.Time, acts []HostAction) {
	for _, act := range acts {
		switch act := act.(type) {
		case HostSend:
			s.send(act.Msg)
		case HostDeliver:
			// The sink is the waiting Ask, reached under this lock: it
			// accepts, and resolved(answered) follows.
			more, err := s.host.Delivered(now, act.ID, nil)
			if err != nil {
				panic("nexting: session lost track of its delivery: " + err.Error())
			}
			s.apply(now, more)
		case HostResolved:
			a := s.current
			if a == nil || a.id != act.ID {
				panic("nexting: session lost track of request " + act.ID)
			}
			s.current = nil
			s.finish(a, decisionOf(act))
		default:
			panic(fmt.Sprintf("nexting: unhandled host action %T", act))
		}
	}
}

func decisionOf(r HostResolved) Decision {
	switch r.Reason {
	case ReasonAnswered:
		switch r.Choice {
		case ChoiceAllow:
			return DecisionAllow
		case ChoiceDeny:
			return DecisionDeny
		}
	case ReasonExpired:
		return DecisionExpired
	case ReasonCancelled:
		return DecisionCancelled
	}
	// A Session never replaces a request, and answered always carries a
	// valid choice.
	panic(fmt.Sprintf("nexting: unexpected resolution %+v", r))
}

// send encodes and queues one message. A failure to queue (the device
// stopped reading) ends the session as lost, in settle.
func (s *Session) send(m Message) {
	if s.ended || s.sendErr != nil {
		return
	}
	frame, err := s.neg.Encode(m)
	if err != nil {
		panic(fmt.Sprintf("nexting: session built an invalid %s: %v", m.Type(), err))
	}
	if err := s.conn.Send(frame); err != nil {
		s.sendErr = err
	}
}

// settle runs after every input: presents the next waiting ask when none is
// shown, and keeps exactly one timer armed for the host's deadline.
func (s *Session) settle(now time.Time) {
	if s.sendErr != nil && !s.ended {
		s.log.Debug("nexting: cannot send to the device", "err", s.sendErr)
		s.end(DecisionLost)
		// Conn.Close never waits on this lock (Conn's contract), so it may
		// run here; it ends Results, and the reading goroutine returns.
		_ = s.conn.Close()
	}
	if s.ended {
		return
	}
	var shown []HostAction
	for s.current == nil && len(s.queue) > 0 {
		a := s.queue[0]
		s.queue = s.queue[1:]
		left := a.deadline.Sub(now)
		if left < time.Millisecond {
			s.finish(a, DecisionExpired)
			continue
		}
		s.seq++
		a.id = "r" + strconv.FormatUint(s.seq, 10)
		acts, err := s.host.Present(now, a.id, a.summary, left)
		if err != nil {
			panic("nexting: session could not present a checked request: " + err.Error())
		}
		s.current = a
		shown = append(shown, acts...)
	}
	// The timer is armed before the present goes out: a device (or a test
	// on a fake clock) that sees the request may move time at once.
	s.armTimer(now)
	s.apply(now, shown)
}

// armTimer keeps exactly one timer armed for the earliest deadline: the
// host's, or a waiting ask's.
func (s *Session) armTimer(now time.Time) {
	at, ok := s.host.Deadline()
	for _, a := range s.queue { // a waiting ask expires on time too
		if !ok || a.deadline.Before(at) {
			at, ok = a.deadline, true
		}
	}
	if !ok {
		s.stopTimer()
		return
	}
	if s.timer != nil && at.Equal(s.timerAt) {
		return
	}
	s.stopTimer()
	s.timerGen++
	gen := s.timerGen
	s.timerAt = at
	s.timer = s.clk.AfterFunc(at.Sub(now), func() { s.onTimer(gen) })
}

func (s *Session) onTimer(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || gen != s.timerGen {
		return
	}
	s.timer = nil
	now := s.clk.Now()
	s.apply(now, s.host.Tick(now))
	s.queue = slices.DeleteFunc(s.queue, func(a *ask) bool {
		if now.Before(a.deadline) {
			return false
		}
		s.finish(a, DecisionExpired)
		return true
	})
	s.settle(now)
}

func (s *Session) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// withdraw ends an ask whose context ended: a queued one silently, the
// presented one with resolved(cancelled).
func (s *Session) withdraw(now time.Time, a *ask) {
	if a.decided {
		return
	}
	if a == s.current {
		// Cancel first applies an elapsed deadline whose timer has not
		// fired yet: the request then resolves expired (in acts) and is no
		// longer current (ErrNotCurrent) — the deadline came first.
		acts, err := s.host.Cancel(now, a.id)
		s.apply(now, acts)
		if err != nil && !a.decided {
			panic("nexting: session lost track of request " + a.id + ": " + err.Error())
		}
		s.settle(now)
		return
	}
	for i, q := range s.queue {
		if q == a {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.finish(a, DecisionCancelled)
			return
		}
	}
	panic("nexting: session lost track of an ask")
}

// end finishes every ask with d; later asks get d at once.
func (s *Session) end(d Decision) {
	if s.ended {
		return
	}
	s.ended, s.endAs = true, d
	s.stopTimer()
	if s.current != nil {
		s.finish(s.current, d)
		s.current = nil
	}
	for _, a := range s.queue {
		s.finish(a, d)
	}
	s.queue = nil
}

func (s *Session) finish(a *ask, d Decision) {
	if a.decided {
		return
	}
	a.decided = true
	a.result <- d
}
