package lane

import (
	"fmt"
	"sync/atomic"

	"github.com/sema-agent/sema/protocol"
)

// The life of one lane connection as a state machine: pure, no I/O. The
// connection (conn.go) holds its state in a connPhase and moves it only
// through step; the frames a state admits are decided by admit. Both are
// total over their inputs, and a test walks every cell of both tables.
//
//	handshaking --hello--> verifying --attach--> awaitingAck --generationAck--> active
//	     |                    |                      |  \                        |
//	  deadline        reject, deadline             goodbye                    goodbye
//	     v                    v                      v    \--------> leaving <---/
//	   closed <-----------  closed  <--- drop, end --+-------------------+
//
// end (the socket's read side is over) takes every state to closed.

// connState is where a connection is in its life.
type connState uint32

const (
	connHandshaking connState = iota // challenge sent; the first frame must be a hello (§1.2)
	connVerifying                    // a hello is being verified; it consumed the nonce
	connAwaitingAck                  // helloAck queued; nothing is dispatched before generationAck (R10)
	connActive                       // dispatching
	connLeaving                      // the device said goodbye: collect, dispatch nothing (R15)
	connClosed                       // rejected, timed out, superseded, revoked, drained or dropped
	connStates                       // the number of states; not a state
)

func (s connState) String() string {
	switch s {
	case connHandshaking:
		return "handshaking"
	case connVerifying:
		return "verifying"
	case connAwaitingAck:
		return "awaitingAck"
	case connActive:
		return "active"
	case connLeaving:
		return "leaving"
	case connClosed:
		return "closed"
	}
	return fmt.Sprintf("connState(%d)", uint32(s))
}

// online reports whether the device counts as connected in this state: it
// holds the lease and the connection is the device's current one. Presence
// and the metrics' connected-devices gauge both ask this.
func (s connState) online() bool {
	switch s {
	case connAwaitingAck, connActive, connLeaving:
		return true
	case connHandshaking, connVerifying, connClosed:
	}
	return false
}

// takesWork reports whether a dispatch may be queued for the connection:
// from helloAck (it waits for generationAck) until a goodbye (R15).
func (s connState) takesWork() bool { return s == connAwaitingAck || s == connActive }

// takesCancels reports whether cancels may be written: once generationAck
// opened the connection, and through a goodbye, since in-flight work still
// runs (R15).
func (s connState) takesCancels() bool { return s == connActive || s == connLeaving }

// connEvent is what moves a connection.
type connEvent uint32

const (
	evHello         connEvent = iota // the first frame, a well-formed hello
	evAttach                         // the hello verified and the lease taken; helloAck follows
	evReject                         // the hello refused; helloReject follows
	evDeadline                       // the handshake deadline passed (§1.2)
	evGenerationAck                  // generationAck for this generation (R10)
	evGoodbye                        // the device said goodbye (R15)
	evDrop                           // the lane ends it with a bye: superseded, revoked, draining (R13)
	evEnd                            // the socket's read side is over
	connEvents                       // the number of events; not an event
)

func (e connEvent) String() string {
	switch e {
	case evHello:
		return "hello"
	case evAttach:
		return "attach"
	case evReject:
		return "reject"
	case evDeadline:
		return "deadline"
	case evGenerationAck:
		return "generationAck"
	case evGoodbye:
		return "goodbye"
	case evDrop:
		return "drop"
	case evEnd:
		return "end"
	}
	return fmt.Sprintf("connEvent(%d)", uint32(e))
}

// transitionError is an event the state does not allow: a bug in the lane
// (device frames are screened by admit before they become events), so it
// is logged as an error and the state does not move.
type transitionError struct {
	From  connState
	Event connEvent
}

func (e *transitionError) Error() string {
	return fmt.Sprintf("lane: illegal connection transition: %v in state %v", e.Event, e.From)
}

// step is the transition function. It returns the next state, which is
// from itself when the event is legal but moot (a deadline that fires after
// the handshake finished, an attach or a reject that finds the deadline
// already closed the socket, a second drop), or an error.
func step(from connState, ev connEvent) (connState, error) {
	illegal := func() (connState, error) { return from, &transitionError{From: from, Event: ev} }
	if from >= connStates {
		return illegal()
	}
	switch ev {
	case evHello:
		switch from {
		case connHandshaking:
			return connVerifying, nil
		case connClosed:
			return connClosed, nil // the deadline passed as the hello was read
		}
	case evAttach:
		switch from {
		case connVerifying:
			return connAwaitingAck, nil
		case connClosed:
			return connClosed, nil // the deadline won: nothing is attached
		}
	case evReject:
		switch from {
		case connVerifying:
			return connClosed, nil
		case connClosed:
			return connClosed, nil
		}
	case evDeadline:
		switch from {
		case connHandshaking, connVerifying:
			return connClosed, nil
		default:
			return from, nil // the handshake ended first
		}
	case evGenerationAck:
		if from == connAwaitingAck {
			return connActive, nil
		}
	case evGoodbye:
		if from == connAwaitingAck || from == connActive {
			return connLeaving, nil
		}
	case evDrop:
		switch from {
		case connAwaitingAck, connActive, connLeaving, connClosed:
			return connClosed, nil
		}
	case evEnd:
		return connClosed, nil
	}
	return illegal()
}

// connPhase holds a connection's state. It is read without a lock by the
// socket's reader and the handshake deadline, and under the device's lock
// by everything that dispatches; it moves only by compare-and-swap through
// step, so concurrent events (an attach racing the deadline) are decided
// once, in one order.
type connPhase struct{ v atomic.Uint32 }

func (p *connPhase) load() connState { return connState(p.v.Load()) }

// to applies ev and returns the state it left and the one it reached
// (equal when the event was moot); on an illegal event the state does not
// move and the error says why.
func (p *connPhase) to(ev connEvent) (from, next connState, err error) {
	for {
		from = p.load()
		next, err = step(from, ev)
		if err != nil || next == from {
			return from, next, err
		}
		if p.v.CompareAndSwap(uint32(from), uint32(next)) {
			return from, next, nil
		}
	}
}

// frameAction is what an admitted or refused frame leads to.
type frameAction uint8

const (
	frameHandle frameAction = iota // act on it
	frameDrop                      // refuse it with an audited reason; the connection goes on (§2.4)
	frameClose                     // refuse it with an audited reason and close the connection
	frameRepeat                    // a handshake or goodbye frame already taken: audited, changes nothing
)

// verdict is admit's answer; reason, the audited one, is set for
// frameDrop and frameClose.
type verdict struct {
	action frameAction
	reason string
}

// admit decides what a connection in state st does with a parsed frame of
// type t (§2.4 stage 2). current says the frame's gen is this socket's
// negotiated one and the socket is the device's current connection (R9);
// it is ignored for a hello, which carries no gen.
func admit(st connState, t protocol.DeviceFrameType, current bool) verdict {
	handle := verdict{action: frameHandle}
	drop := func(r protocol.GateRejectReason) verdict { return verdict{action: frameDrop, reason: string(r)} }
	switch st {
	case connHandshaking:
		if t == protocol.TypeHello {
			return handle
		}
		// §2.4: a non-hello frame before the handshake closes the connection.
		return verdict{action: frameClose, reason: string(protocol.GatePreHello)}
	case connVerifying:
		// §2.4: one stray frame must not be able to kill a legitimate handshake.
		return drop(protocol.GatePreHello)
	case connAwaitingAck, connActive, connLeaving, connClosed:
	default:
		return drop(protocol.GateGenerationMismatch) // unreachable: connPhase holds only valid states
	}
	switch t {
	case protocol.TypeHello:
		return drop(protocol.GatePreHello) // a second hello on an established connection
	case protocol.TypeGenerationAck, protocol.TypeHeartbeat, protocol.TypeResult, protocol.TypeChunk, protocol.TypeGoodbye:
	default:
		// A type outside DEVICE_FRAME_TYPES never decodes (§2.4 stage 1
		// refuses it unknown_type); should one reach here, it is refused
		// the same way.
		return verdict{action: frameDrop, reason: string(protocol.ReasonUnknownType)}
	}
	if !current || st == connClosed {
		return drop(protocol.GateGenerationMismatch) // R9
	}
	switch {
	case t == protocol.TypeGenerationAck && st != connAwaitingAck:
		return verdict{action: frameRepeat}
	case t == protocol.TypeGoodbye && st == connLeaving:
		return verdict{action: frameRepeat}
	}
	return handle
}
