package nexting

import (
	"fmt"
	"slices"
	"time"
)

// AnswerResendInterval is how often a device in Waiting Resolution sends
// its identical answer again (short spec §3: "may resend the identical
// answer after 1000 ms").
const AnswerResendInterval = 1000 * time.Millisecond

// DeviceState is the device's approval state (profiles sheet "Approval
// state and races").
type DeviceState int

const (
	// DeviceIdle: no approval shown.
	DeviceIdle DeviceState = iota
	// DevicePending: an approval is shown and no button was pressed.
	DevicePending
	// DeviceWaiting: Waiting Resolution — a choice was sent; it is resent
	// every AnswerResendInterval until a matching resolved or the local TTL.
	DeviceWaiting
)

func (s DeviceState) String() string {
	switch s {
	case DeviceIdle:
		return "idle"
	case DevicePending:
		return "pending"
	case DeviceWaiting:
		return "waiting_resolution"
	}
	return fmt.Sprintf("DeviceState(%d)", int(s))
}

// Device is the approval device's state machine for approval/1 and
// status/1. Like Host it is pure: inputs take the current instant from the
// caller's monotonic clock, Deadline says when to call Tick, and it is not
// safe for concurrent use. Transitions:
//
//	Idle + present                  → Pending (TTL from receipt)
//	Pending + present               → Pending, replaced
//	Pending + button                → send answer, Waiting Resolution
//	Waiting + 1000 ms               → send the identical answer again
//	Pending/Waiting + matching resolved → Idle (UI and retry state cleared)
//	Pending/Waiting + local TTL     → Idle
//	any + Reset (disconnect, reboot) → Idle, status cleared
//	anything else (a resolved for another id, a second button press,
//	input while Idle)               → ignored
//
// A present while Waiting Resolution replaces the request too (the host
// resolves the old one first, so this only happens if that resolved was
// lost), except a present of the very request being waited on, which
// changes nothing: the choice already sent stands.
type Device struct {
	state    DeviceState
	req      Present
	deadline time.Time // receipt + TTL
	choice   Choice
	resendAt time.Time

	slots  int     // physical status slots, 0–8
	status []Agent // rendered: slot < slots, ascending
}

// NewDevice returns an idle device with statusSlots physical status slots
// (Device Info statusSlots, 0–8).
func NewDevice(statusSlots int) *Device {
	return &Device{slots: min(max(statusSlots, 0), maxStatusSlot+1)}
}

// State is the approval state (without applying an elapsed deadline; Tick
// does that).
func (d *Device) State() DeviceState { return d.state }

// Present shows the request p, received at now.
func (d *Device) Present(now time.Time, p Present) {
	d.expire(now)
	switch d.state {
	case DeviceIdle, DevicePending:
	case DeviceWaiting:
		if p.ID == d.req.ID {
			return
		}
	default:
		panic(d.badState())
	}
	d.req = p
	d.deadline = now.Add(time.Duration(p.TTLMillis) * time.Millisecond)
	d.choice = ""
	d.resendAt = time.Time{}
	d.state = DevicePending
}

// Press is a button press. In Pending it locks the choice and returns the
// answer to send; otherwise (Idle, already Waiting Resolution, an invalid
// choice) it is ignored.
func (d *Device) Press(now time.Time, c Choice) (Answer, bool) {
	d.expire(now)
	switch d.state {
	case DeviceIdle, DeviceWaiting:
		return Answer{}, false
	case DevicePending:
		if !c.Valid() {
			return Answer{}, false
		}
		d.choice = c
		d.state = DeviceWaiting
		d.resendAt = now.Add(AnswerResendInterval)
		return Answer{ID: d.req.ID, Choice: c}, true
	}
	panic(d.badState())
}

// Resolved handles a resolved from the host and reports whether it cleared
// the visible request. One for any other id changes nothing.
func (d *Device) Resolved(now time.Time, r Resolved) bool {
	d.expire(now)
	switch d.state {
	case DeviceIdle:
		return false
	case DevicePending, DeviceWaiting:
		if r.ID != d.req.ID {
			return false
		}
		d.clear()
		return true
	}
	panic(d.badState())
}

// Tick applies the local TTL and returns the answer to resend when one is
// due. At the instant the TTL ends, expiry wins over a resend.
func (d *Device) Tick(now time.Time) (Answer, bool) {
	d.expire(now)
	switch d.state {
	case DeviceIdle, DevicePending:
		return Answer{}, false
	case DeviceWaiting:
		if now.Before(d.resendAt) {
			return Answer{}, false
		}
		d.resendAt = now.Add(AnswerResendInterval)
		return Answer{ID: d.req.ID, Choice: d.choice}, true
	}
	panic(d.badState())
}

// Deadline is when Tick must next be called: the local TTL while Pending,
// the earlier of the TTL and the next resend while Waiting Resolution.
func (d *Device) Deadline() (time.Time, bool) {
	switch d.state {
	case DeviceIdle:
		return time.Time{}, false
	case DevicePending:
		return d.deadline, true
	case DeviceWaiting:
		if d.resendAt.Before(d.deadline) {
			return d.resendAt, true
		}
		return d.deadline, true
	}
	panic(d.badState())
}

// SetStatus applies a decoded status frame: an atomic full replacement of
// every slot; slots the device does not have are ignored. A malformed frame
// never decodes, so it never reaches SetStatus and the previous status
// stays.
func (d *Device) SetStatus(s Status) {
	var next []Agent
	for _, a := range s.Agents {
		if a.Slot < d.slots {
			next = append(next, a)
		}
	}
	slices.SortFunc(next, func(a, b Agent) int { return a.Slot - b.Slot })
	d.status = next
}

// Status returns the rendered slots, ascending, as a copy.
func (d *Device) Status() []Agent { return slices.Clone(d.status) }

// Reset is a disconnect or a reboot: the approval UI, retry state and the
// rendered status are cleared. A device never restores an approval.
func (d *Device) Reset() {
	d.clear()
	d.status = nil
}

// DeviceView is what the device shows.
type DeviceView struct {
	State     DeviceState
	ID        string        // "" when Idle
	Summary   string        // the prompt
	Remaining time.Duration // of the local TTL, 0 when Idle or elapsed
	Choice    Choice        // the locked choice in Waiting Resolution
	Status    []Agent       // rendered slots, ascending
}

// View returns what the device shows at now. It changes nothing: an elapsed
// TTL shows Remaining 0 until Tick.
func (d *Device) View(now time.Time) DeviceView {
	v := DeviceView{State: d.state, Status: d.Status()}
	switch d.state {
	case DeviceIdle:
	case DevicePending, DeviceWaiting:
		v.ID, v.Summary, v.Choice = d.req.ID, d.req.Summary, d.choice
		v.Remaining = max(d.deadline.Sub(now), 0)
	default:
		panic(d.badState())
	}
	return v
}

func (d *Device) expire(now time.Time) {
	switch d.state {
	case DeviceIdle:
	case DevicePending, DeviceWaiting:
		if !now.Before(d.deadline) {
			d.clear()
		}
	default:
		panic(d.badState())
	}
}

func (d *Device) clear() {
	d.state = DeviceIdle
	d.req = Present{}
	d.deadline = time.Time{}
	d.choice = ""
	d.resendAt = time.Time{}
}

func (d *Device) badState() string {
	return fmt.Sprintf("nexting: device state machine in unknown state %v", d.state)
}
