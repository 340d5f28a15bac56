// Package approve holds instructions until a person allows them on a
// nexting approval device, for `sema device serve --approve`. A Gate sits
// in the executor's instruction table (executor.Config.Gate): before an
// instruction's op starts, the Gate checks its Policy; an instruction that
// needs approval is presented on the device with a one-line Summary and a
// TTL inside its timeoutMs, and runs only after allow. Deny, expiry, a
// withdrawn request or a lost device answer permission_denied, saying
// which; nothing runs before allow. When the device has status/1, its
// slots mirror the instructions in flight.
//
// Start with gate.go (Gate, Config, Run), then policy.go (Policy and its
// JSON form) and summary.go (what the person reads). docs/executor.md
// ("Approval") documents the policy file and the choices made here.
package approve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/nexting"
	"github.com/sema-agent/sema/protocol"
)

// Config configures a Gate.
type Config struct {
	// Policy says what needs approval; nil means DefaultPolicy().
	Policy *Policy
	// WorkspaceRoot is the enrolled root (absolute): writes below it are
	// "inside the workspace", an exec without cwd runs there.
	WorkspaceRoot string
	// TempDir, when set, is the executor's temporary kinds' directory:
	// below it counts as inside the workspace too. It is the executor's
	// own private scratch space (where `sema run` puts a piped stdin, read
	// only by a command that is itself approved), so that writing it and
	// removing from it do not ask a person again.
	TempDir string
	// Device names the device in messages and logs ("unix:/path").
	Device string
	// Open connects to the device and starts a host session on it with
	// the SessionConfig it is given (the gate's clock and logger):
	// Target.Open is the usual one, for every kind of target, BLE
	// included. One of Open and Dial is required; Open wins.
	Open func(ctx context.Context, cfg nexting.SessionConfig) (*nexting.Session, error)
	// Dial connects to a byte-stream device, which writes its Device Info
	// line first (docs/nexting.md, "Device Info on a stream"); the gate
	// starts the session with nexting.OpenStream. Target.Dial is one.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	// Clock drives TTLs, reconnection and the status rate; nil is the
	// system clock.
	Clock nexting.Clock
	// Logger gets connection events and decisions (ids, kinds and
	// decisions only: never a command or a path). nil discards.
	Logger *slog.Logger
	// ConnectTimeout bounds one connection attempt, Device Info included
	// (default 5 s, real time). RetryInterval is the wait between
	// attempts and after the device went away (default 2 s, on Clock).
	ConnectTimeout time.Duration
	RetryInterval  time.Duration
}

// MinSummaryBytes: a device that negotiates a shorter summary than this
// cannot be shown what would run, so nothing is presented on it and
// instructions needing approval are refused.
const MinSummaryBytes = 32

// StatusInterval is the shortest time between two status frames: status
// changes in between are coalesced into the next frame.
const StatusInterval = 250 * time.Millisecond

// Gate is the approval gate. It owns one goroutine, which keeps a
// connection to the device (reconnecting after RetryInterval); Close stops
// it. Every method is safe for concurrent use.
type Gate struct {
	cfg    Config
	policy *Policy
	clk    clock.Clock
	log    *slog.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the keeper has returned

	mu       sync.Mutex
	sess     *nexting.Session // nil while no device is connected
	up       chan struct{}    // closed while sess != nil
	flights  []*flight        // in flight, oldest first
	lastSent time.Time        // of the last status frame
	sentAny  bool
	pending  bool        // a status change waits for the timer
	timer    clock.Timer // the status timer, nil when not armed
}

// flight is one instruction in the gate, for status/1.
type flight struct {
	label string
	state nexting.AgentState
}

// New starts a Gate: it connects to the device in the background. An
// instruction that needs approval while no device is connected waits for
// one within its approval TTL.
func New(cfg Config) (*Gate, error) {
	if cfg.WorkspaceRoot == "" {
		return nil, errors.New("approve: Config.WorkspaceRoot is required")
	}
	if cfg.Open == nil && cfg.Dial == nil {
		return nil, errors.New("approve: Config.Open or Config.Dial is required")
	}
	if cfg.Policy == nil {
		cfg.Policy = DefaultPolicy()
	}
	p := *cfg.Policy // the caller's value stays untouched
	if p.TTL == 0 {
		p.TTL = DefaultTTL
	}
	if p.TTL < MinTTL || p.TTL > MaxTTL {
		return nil, fmt.Errorf("approve: Policy.TTL %v is outside %v-%v", p.TTL, MinTTL, MaxTTL)
	}
	cfg.Policy = &p
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 2 * time.Second
	}
	if cfg.Device == "" {
		cfg.Device = "the approval device"
	}
	g := &Gate{cfg: cfg, policy: cfg.Policy, clk: cfg.Clock, log: cfg.Logger, up: make(chan struct{}), done: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	go g.keep()
	return g, nil
}

// Close disconnects from the device and stops the Gate: approvals waiting
// on it end, refused (permission_denied). Later instructions needing
// approval are refused at once.
func (g *Gate) Close() error {
	g.cancel()
	<-g.done
	g.mu.Lock()
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.mu.Unlock()
	return nil
}

// WaitConnected waits until a device is connected, or ctx ends.
func (g *Gate) WaitConnected(ctx context.Context) error {
	g.mu.Lock()
	up := g.up
	g.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-g.done:
		return errors.New("approve: the gate is closed")
	}
}

// Asks reports whether req waits for a person's decision (the policy
// needs approval for it), rather than running at once.
func (g *Gate) Asks(req ops.Request) bool {
	return g.policy.Needs(req, g.cfg.WorkspaceRoot, g.cfg.TempDir)
}

// Run is executor.Gate: it runs req through run unless it needs approval,
// in which case it first asks the device and runs it only after allow,
// with req.Timeout reduced by the time the approval took. Otherwise it
// answers without calling run.
func (g *Gate) Run(ctx context.Context, req ops.Request, run func(ops.Request) protocol.Outcome) protocol.Outcome {
	f := &flight{label: Summary(req, g.cfg.WorkspaceRoot, 64), state: nexting.AgentWorking}
	needs := g.Asks(req)
	if needs {
		f.state = nexting.AgentNeedsInput
	}
	g.track(f, true)
	defer g.track(f, false)
	if !needs {
		return run(req)
	}
	var h *held
	if req.Payload != nil {
		h = holdPayload(req.Payload, MaxHeldPayloadBytes)
	}
	req, refused := g.approve(ctx, req)
	if refused != nil {
		if h != nil {
			h.drop()
		}
		g.log.Info("approval: instruction not allowed", "instructionId", req.InstructionID, "kind", req.Kind, "outcome", outcomeWord(refused))
		return refused
	}
	g.log.Info("approval: instruction allowed", "instructionId", req.InstructionID, "kind", req.Kind)
	g.setState(f, nexting.AgentWorking)
	if h != nil {
		fctx, stop := context.WithCancel(ctx)
		var wait func()
		req.Payload, wait = h.release(fctx)
		defer wait()
		defer stop()
	}
	return run(req)
}

// approve asks the device about req. It returns req with its remaining
// timeout and a nil outcome after allow, else the outcome that answers the
// instruction instead.
func (g *Gate) approve(ctx context.Context, req ops.Request) (ops.Request, protocol.Outcome) {
	start := g.clk.Now()
	ttl := g.policy.TTL
	if req.Timeout > 0 {
		ttl = min(ttl, req.Timeout/2) // leave at least half of timeoutMs to run it
	}
	if ttl < time.Millisecond {
		return req, refuse("its timeoutMs (%v) leaves no time to ask for approval", req.Timeout)
	}
	deadline := start.Add(ttl)
	s, why := g.session(ctx, deadline)
	if s == nil {
		return req, g.withdrawn(ctx, why)
	}
	limit := s.Negotiated().MaxSummaryBytes()
	if limit < MinSummaryBytes {
		return req, refuse("%s shows at most %d bytes of summary, too few to say what would run", g.cfg.Device, limit)
	}
	left := deadline.Sub(g.clk.Now())
	if left < time.Millisecond {
		return req, refuse("%s did not answer within %v (no device was connected in time)", g.cfg.Device, ttl)
	}
	d, err := s.Ask(ctx, Summary(req, g.cfg.WorkspaceRoot, limit), left)
	if err != nil {
		return req, refuse("the request could not be shown on %s: %v", g.cfg.Device, err)
	}
	switch d {
	case nexting.DecisionAllow:
		if req.Timeout > 0 {
			req.Timeout = max(req.Timeout-g.clk.Now().Sub(start), time.Millisecond)
		}
		return req, nil
	case nexting.DecisionDeny:
		return req, refuse("denied on %s", g.cfg.Device)
	case nexting.DecisionExpired:
		return req, refuse("not answered on %s within %v (expired)", g.cfg.Device, ttl)
	case nexting.DecisionLost:
		return req, refuse("%s was lost (disconnected) before an answer", g.cfg.Device)
	case nexting.DecisionCancelled:
		return req, g.withdrawn(ctx, "the request was cancelled on "+g.cfg.Device+" because the approval gate closed")
	}
	return req, refuse("%s gave an unknown decision %q", g.cfg.Device, d)
}

// withdrawn is the answer when waiting ended without a decision: when the
// instruction's context ended, a server cancel gets the cancel receipt
// not_started (R11: nothing began) and any other cause (fence, shutdown)
// permission_denied naming it; otherwise permission_denied saying why.
func (g *Gate) withdrawn(ctx context.Context, why string) protocol.Outcome {
	if ctx.Err() == nil {
		return refuse("%s", why)
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, ops.ErrCancelled) {
		return protocol.CancelledOutcome{State: protocol.CancelNotStarted}
	}
	return refuse("the approval request was withdrawn: %v", cause)
}

func refuse(format string, args ...any) protocol.Outcome {
	return protocol.Fail(protocol.ErrPermissionDenied, "approval required: "+format+"; the instruction was not run", args...)
}

// outcomeWord names an outcome for logs without its message.
func outcomeWord(o protocol.Outcome) string {
	switch o := o.(type) {
	case protocol.Failure:
		return "error:" + string(o.ErrorCode)
	case protocol.CancelledOutcome:
		return "cancelled:" + string(o.State)
	}
	return string(o.Kind())
}

// session returns the connected device's session, waiting for one until
// deadline (on the gate's clock) or ctx's end. nil comes with why.
func (g *Gate) session(ctx context.Context, deadline time.Time) (*nexting.Session, string) {
	expired := make(chan struct{})
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		s, up := g.sess, g.up
		if s != nil {
			select {
			case <-s.Done(): // gone; the keeper will notice
				g.unpublishLocked(s)
				s, up = nil, g.up
			default:
			}
		}
		g.mu.Unlock()
		if s != nil {
			return s, ""
		}
		if timer == nil {
			wait := deadline.Sub(g.clk.Now())
			if wait <= 0 {
				return nil, fmt.Sprintf("no approval device is connected (%s)", g.cfg.Device)
			}
			timer = g.clk.AfterFunc(wait, func() { close(expired) })
		}
		select {
		case <-up:
		case <-expired:
			return nil, fmt.Sprintf("no approval device is connected (%s) and none connected in time", g.cfg.Device)
		case <-ctx.Done():
			return nil, "cancelled"
		case <-g.ctx.Done():
			return nil, "the approval gate closed (the executor is stopping)"
		}
	}
}

// keep connects to the device, holds the connection while it lasts, and
// tries again RetryInterval after a failure or a loss, until Close.
func (g *Gate) keep() {
	defer close(g.done)
	failures := 0
	for {
		s, err := g.connect()
		switch {
		case err == nil:
			failures = 0
			g.log.Info("approval device connected", "device", g.cfg.Device, "model", s.Info().Model,
				"profiles", fmt.Sprint(s.Negotiated().Profiles()), "statusSlots", s.Negotiated().StatusSlots())
			g.publish(s)
			select {
			case <-s.Done():
				g.log.Warn("approval device disconnected; instructions needing approval are refused until it is back", "device", g.cfg.Device, "err", s.Err())
				g.mu.Lock()
				g.unpublishLocked(s)
				g.mu.Unlock()
			case <-g.ctx.Done():
				g.mu.Lock()
				g.unpublishLocked(s)
				g.mu.Unlock()
				_ = s.Close()
				return
			}
		case g.ctx.Err() != nil:
			return
		default:
			if failures == 0 {
				g.log.Warn("cannot connect to the approval device; retrying", "device", g.cfg.Device, "err", err)
			} else {
				g.log.Debug("cannot connect to the approval device; retrying", "device", g.cfg.Device, "err", err)
			}
			failures++
		}
		wake := make(chan struct{})
		t := g.clk.AfterFunc(g.cfg.RetryInterval, func() { close(wake) })
		select {
		case <-wake:
		case <-g.ctx.Done():
			t.Stop()
			return
		}
	}
}

func (g *Gate) connect() (*nexting.Session, error) {
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.ConnectTimeout)
	defer cancel()
	cfg := nexting.SessionConfig{Clock: g.clk, Logger: g.log}
	if g.cfg.Open != nil {
		return g.cfg.Open(ctx, cfg)
	}
	rw, err := g.cfg.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return nexting.OpenStream(ctx, rw, cfg)
}

func (g *Gate) publish(s *nexting.Session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sess = s
	close(g.up)
	g.sentAny = false // a new connection starts with a clear display
	g.statusLocked()
}

func (g *Gate) unpublishLocked(s *nexting.Session) {
	if g.sess != s {
		return
	}
	g.sess = nil
	g.up = make(chan struct{})
}

// track adds f to the instructions in flight, or removes it.
func (g *Gate) track(f *flight, add bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if add {
		g.flights = append(g.flights, f)
	} else {
		g.flights = slices.DeleteFunc(g.flights, func(x *flight) bool { return x == f })
	}
	g.statusLocked()
}

func (g *Gate) setState(f *flight, st nexting.AgentState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.state = st
	g.statusLocked()
}

// statusLocked mirrors the instructions in flight on the device's status
// slots (status/1), oldest in slot 0: at once when the last frame is
// StatusInterval old, else when the timer fires. Instructions beyond the
// device's slots are not shown.
func (g *Gate) statusLocked() {
	if g.sess == nil || !g.sess.Negotiated().Has(nexting.ProfileStatus) {
		return
	}
	now := g.clk.Now()
	if g.sentAny && now.Sub(g.lastSent) < StatusInterval {
		if !g.pending {
			g.pending = true
			g.timer = g.clk.AfterFunc(g.lastSent.Add(StatusInterval).Sub(now), g.flushStatus)
		}
		return
	}
	n := min(len(g.flights), g.sess.Negotiated().StatusSlots())
	agents := make([]nexting.Agent, n)
	for i, f := range g.flights[:n] {
		agents[i] = nexting.Agent{Slot: i, State: f.state, Label: f.label}
	}
	if err := g.sess.SetStatus(agents); err != nil {
		g.log.Debug("approval device: status not sent", "err", err)
	}
	g.lastSent, g.sentAny = now, true
}

func (g *Gate) flushStatus() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.pending {
		return
	}
	g.pending, g.timer = false, nil
	g.sentAny = false // due now
	g.statusLocked()
}
