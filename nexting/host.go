package nexting

import (
	"errors"
	"fmt"
	"time"
)

// Host is the approval requester's state machine for approval/1 (short spec
// §2–5, profiles sheet "Approval state and races"). It is pure: no I/O, no
// goroutines, no clock of its own. Every input takes the current instant
// from the caller's monotonic clock and returns the effects to carry out,
// in order; Deadline says when to call Tick next. It is not safe for
// concurrent use: the driver (Session) calls it under one lock.
//
// One request is current at a time. Its lifecycle:
//
//	idle ──Present──▶ presented ──answer──▶ delivering ──sink accepts──▶ resolved answered
//	                  │  ▲                    │
//	                  │  └──sink fails────────┘ (gate released, choice stays locked)
//	                  ├──deadline──▶ resolved expired
//	                  ├──Cancel────▶ resolved cancelled
//	                  └──Present───▶ resolved replaced (then the new request is presented)
//
// While a delivery is in flight nothing is re-presented or retried, a new
// Present is refused (ErrBusy), and Cancel and the deadline only take effect
// if the sink fails: success still resolves answered.
type Host struct {
	state     hostState
	req       hostRequest
	connected bool
	history   [hostHistory]hostOutcome // recently resolved requests, a ring
	next      int                      // where the ring writes next
}

// hostHistory is how many resolved requests the host remembers, so a late
// or repeated answer is re-answered with its resolved instead of
// unknown_request. A device resends only until its local TTL (at most
// 300 s), so a short memory suffices.
const hostHistory = 64

type hostState int

const (
	hostIdle       hostState = iota // no current request
	hostPresented                   // current request shown; the gate is free
	hostDelivering                  // a choice is with the action sink
)

func (s hostState) String() string {
	switch s {
	case hostIdle:
		return "idle"
	case hostPresented:
		return "presented"
	case hostDelivering:
		return "delivering"
	}
	return fmt.Sprintf("hostState(%d)", int(s))
}

type hostRequest struct {
	id        string
	summary   string
	deadline  time.Time // presentation + TTL, monotonic
	locked    Choice    // the first hardware choice; "" until one arrives
	withdrawn bool      // Cancel arrived during a delivery
	unseen    bool      // the device on the current link has not been shown it
}

type hostOutcome struct {
	id     string
	reason Reason
}

// HostAction is one effect of a Host input: HostSend, HostDeliver or
// HostResolved. Carry them out in the order returned.
type HostAction interface{ hostAction() }

// HostSend asks the driver to send Msg to the device.
type HostSend struct{ Msg Message }

// HostDeliver asks the driver to hand Choice to the action sink for request
// ID (the one authoritative attempt in flight) and to report the sink's
// verdict with Delivered.
type HostDeliver struct {
	ID     string
	Choice Choice
}

// HostResolved reports that request ID is final. Choice is the choice the
// sink accepted when Reason is answered, and "" for every other reason.
type HostResolved struct {
	ID     string
	Reason Reason
	Choice Choice
}

func (HostSend) hostAction()     {}
func (HostDeliver) hostAction()  {}
func (HostResolved) hostAction() {}

// Errors of Host inputs that the caller got wrong.
var (
	// ErrBusy: Present while a delivery to the action sink is in flight.
	ErrBusy = errors.New("nexting: an action-sink delivery is in flight")
	// ErrNotCurrent: Cancel or Delivered for a request that is not the
	// current one (already resolved, replaced, or never presented).
	ErrNotCurrent = errors.New("nexting: not the current request")
	// ErrIDInUse: Present with the id of the current or a remembered
	// request.
	ErrIDInUse = errors.New("nexting: request id already used")
)

// NewHost returns an idle Host whose link is up.
func NewHost() *Host { return &Host{connected: true} }

// HostRequest describes the current request.
type HostRequest struct {
	ID         string
	Summary    string
	Deadline   time.Time
	Locked     Choice // the first hardware choice, "" before one
	Delivering bool
}

// Current returns the current request, if any.
func (h *Host) Current() (HostRequest, bool) {
	switch h.state {
	case hostIdle:
		return HostRequest{}, false
	case hostPresented, hostDelivering:
		return HostRequest{ID: h.req.id, Summary: h.req.summary, Deadline: h.req.deadline,
			Locked: h.req.locked, Delivering: h.state == hostDelivering}, true
	}
	panic(h.badState())
}

// Deadline is when Tick must next be called: the current request's
// expiry while it is presented. There is none while idle or delivering (a
// delivery's outcome decides what an elapsed deadline means).
func (h *Host) Deadline() (time.Time, bool) {
	switch h.state {
	case hostIdle, hostDelivering:
		return time.Time{}, false
	case hostPresented:
		return h.req.deadline, true
	}
	panic(h.badState())
}

// Present makes a new request current with a lifetime of ttl from now.
// ttl must be 1 ms…300 s; the wire carries it in whole milliseconds,
// rounded down, so the device never outlives the host. A current request
// that has not expired is first resolved replaced: the returned actions
// send resolved(old, replaced) before present(new).
func (h *Host) Present(now time.Time, id, summary string, ttl time.Duration) ([]HostAction, error) {
	if ttl < time.Millisecond || ttl > MaxTTLMillis*time.Millisecond {
		return nil, fmt.Errorf("nexting: ttl %v outside 1ms-%dms", ttl, MaxTTLMillis)
	}
	if e := (Present{ID: id, Summary: summary, TTLMillis: int(ttl.Milliseconds())}).validate(); e != nil {
		return nil, e
	}
	out := h.expire(now, nil)
	if h.known(id) {
		return out, ErrIDInUse
	}
	switch h.state {
	case hostIdle:
	case hostPresented:
		out = h.resolve(out, ReasonReplaced)
	case hostDelivering:
		return out, ErrBusy
	default:
		panic(h.badState())
	}
	h.req = hostRequest{id: id, summary: summary, deadline: now.Add(ttl), unseen: true}
	h.state = hostPresented
	return h.show(now, out), nil
}

// Answer handles a decoded answer from the device; size is its frame's
// length with the LF (it bounds an error reply, see Reply).
//
//   - For the current, unexpired request with the gate free: the first
//     choice is locked and handed to the sink (HostDeliver). A different
//     choice after that is ignored; the same choice again (after a failed
//     delivery) is delivered again.
//   - For the current request while a delivery is in flight: ignored (a
//     resend, or a different choice, which the lock rejects).
//   - For the current request past its deadline: resolved expired.
//   - For a remembered, resolved request: its resolved is sent again.
//   - For any other id: error unknown_request, unless the reply would
//     be larger than the answer (Reply's amplification rule).
func (h *Host) Answer(now time.Time, a Answer, size int) []HostAction {
	out := h.expire(now, nil)
	if len(out) > 0 && out[len(out)-1].(HostResolved).ID == a.ID {
		return out // expiring just now already sent its resolved
	}
	switch h.state {
	case hostIdle:
	case hostPresented:
		if a.ID == h.req.id {
			if !a.Choice.Valid() || h.req.locked != "" && a.Choice != h.req.locked {
				return out
			}
			h.req.locked = a.Choice
			h.state = hostDelivering
			return append(out, HostDeliver{ID: a.ID, Choice: a.Choice})
		}
	case hostDelivering:
		if a.ID == h.req.id {
			return out
		}
	default:
		panic(h.badState())
	}
	if r, ok := h.outcome(a.ID); ok {
		return append(out, HostSend{Resolved{ID: a.ID, Reason: r}})
	}
	e := &Error{Code: CodeUnknownRequest, Field: "id", Detail: "no such request", Type: TypeAnswer, ID: a.ID, Size: size}
	if m, ok := Reply(e); ok {
		out = append(out, HostSend{m})
	}
	return out
}

// Delivered reports the action sink's verdict on the delivery of request
// id: err nil means the sink accepted the choice, which resolves the
// request answered. A failure resolves it cancelled if the host withdrew
// meanwhile, expired if its deadline has passed, and otherwise releases
// the gate with the choice still locked: the device's resent answer (or
// the same choice from elsewhere) may try again. Delivered for anything but
// the delivery in flight returns ErrNotCurrent and changes nothing.
func (h *Host) Delivered(now time.Time, id string, err error) ([]HostAction, error) {
	switch h.state {
	case hostIdle, hostPresented:
		return nil, ErrNotCurrent
	case hostDelivering:
		if id != h.req.id {
			return nil, ErrNotCurrent
		}
	default:
		panic(h.badState())
	}
	switch {
	case err == nil:
		return h.resolve(nil, ReasonAnswered), nil
	case h.req.withdrawn:
		return h.resolve(nil, ReasonCancelled), nil
	case !now.Before(h.req.deadline):
		return h.resolve(nil, ReasonExpired), nil
	}
	h.state = hostPresented
	return h.show(now, nil), nil
}

// Cancel withdraws request id: resolved cancelled now, or, while a delivery
// is in flight, when that delivery fails (its success still resolves
// answered). A request past its deadline resolves expired instead.
func (h *Host) Cancel(now time.Time, id string) ([]HostAction, error) {
	out := h.expire(now, nil)
	switch h.state {
	case hostIdle:
		return out, ErrNotCurrent
	case hostPresented:
		if id != h.req.id {
			return out, ErrNotCurrent
		}
		return h.resolve(out, ReasonCancelled), nil
	case hostDelivering:
		if id != h.req.id {
			return out, ErrNotCurrent
		}
		h.req.withdrawn = true
		return out, nil
	}
	panic(h.badState())
}

// Tick resolves the current request expired once its deadline has passed.
func (h *Host) Tick(now time.Time) []HostAction { return h.expire(now, nil) }

// Disconnected notes that the link to the device is down. Nothing is sent
// until Connected; the deadline keeps running.
func (h *Host) Disconnected(now time.Time) {
	h.connected = false
	switch h.state {
	case hostIdle:
	case hostPresented, hostDelivering:
		h.req.unseen = true // a disconnect clears the device's approval UI
	default:
		panic(h.badState())
	}
}

// Connected notes that the link is up again (framing and device state are
// fresh). A request the host still holds with no delivery in flight is
// presented again with its remaining lifetime as a fresh relative TTL; one
// whose delivery is in flight is presented again if that delivery fails.
func (h *Host) Connected(now time.Time) []HostAction {
	h.connected = true
	return h.show(now, h.expire(now, nil))
}

// expire resolves the presented request expired once now reaches its
// deadline.
func (h *Host) expire(now time.Time, out []HostAction) []HostAction {
	switch h.state {
	case hostIdle, hostDelivering:
		return out
	case hostPresented:
		if now.Before(h.req.deadline) {
			return out
		}
		return h.resolve(out, ReasonExpired)
	}
	panic(h.badState())
}

// show sends present for the presented request if the device on the
// current link has not seen it, with the remaining lifetime in whole
// milliseconds; less than 1 ms left resolves it expired.
func (h *Host) show(now time.Time, out []HostAction) []HostAction {
	if h.state != hostPresented || !h.req.unseen || !h.connected {
		return out
	}
	ms := h.req.deadline.Sub(now).Milliseconds()
	if ms < 1 {
		return h.resolve(out, ReasonExpired)
	}
	h.req.unseen = false
	return append(out, HostSend{Present{ID: h.req.id, Summary: h.req.summary, TTLMillis: int(ms)}})
}

// resolve finalizes the current request: resolved to the device (if it has
// seen the request on this link), the outcome to the caller, the id to the
// history.
func (h *Host) resolve(out []HostAction, r Reason) []HostAction {
	id := h.req.id
	if h.connected && !h.req.unseen {
		out = append(out, HostSend{Resolved{ID: id, Reason: r}})
	}
	res := HostResolved{ID: id, Reason: r}
	if r == ReasonAnswered {
		res.Choice = h.req.locked
	}
	out = append(out, res)
	h.history[h.next] = hostOutcome{id: id, reason: r}
	h.next = (h.next + 1) % hostHistory
	h.req = hostRequest{}
	h.state = hostIdle
	return out
}

func (h *Host) outcome(id string) (Reason, bool) {
	for _, o := range h.history {
		if o.id == id && id != "" {
			return o.reason, true
		}
	}
	return "", false
}

func (h *Host) known(id string) bool {
	if h.state != hostIdle && h.req.id == id {
		return true
	}
	_, ok := h.outcome(id)
	return ok
}

func (h *Host) badState() string {
	return fmt.Sprintf("nexting: host state machine in unknown state %v", h.state)
}
