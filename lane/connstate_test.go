package lane

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// Every (state, event) cell of the transition function: the next state,
// or illegal. A cell whose next state is its own is a legal, moot event.
func TestConnStepEveryTransition(t *testing.T) {
	const illegal = connStates // marks a refused cell
	V, A, Ac, L, C, X := connVerifying, connAwaitingAck, connActive, connLeaving, connClosed, illegal
	want := map[connEvent][connStates]connState{
		//                 handshaking verifying awaitingAck active leaving closed
		evHello:         {V, X, X, X, X, C},
		evAttach:        {X, A, X, X, X, C},
		evReject:        {X, C, X, X, X, C},
		evDeadline:      {C, C, A, Ac, L, C},
		evGenerationAck: {X, X, Ac, X, X, X},
		evGoodbye:       {X, X, L, L, X, X},
		evDrop:          {X, X, C, C, C, C},
		evEnd:           {C, C, C, C, C, C},
	}
	if len(want) != int(connEvents) {
		t.Fatalf("the table covers %d events of %d", len(want), connEvents)
	}
	for ev, row := range want {
		for from := range connStates {
			next, err := step(from, ev)
			if row[from] == illegal {
				var te *transitionError
				if !errors.As(err, &te) || te.From != from || te.Event != ev || next != from {
					t.Errorf("%v in %v: (%v, %v), want refused with the state unmoved", ev, from, next, err)
				}
				continue
			}
			if err != nil || next != row[from] {
				t.Errorf("%v in %v: (%v, %v), want %v", ev, from, next, err, row[from])
			}
		}
	}
	// Outside the closed sets, everything is refused.
	if _, err := step(connStates, evEnd); err == nil {
		t.Error("a state outside the set moved")
	}
	if _, err := step(connActive, connEvents); err == nil {
		t.Error("an event outside the set moved a connection")
	}
}

// An illegal transition is refused loudly: an error that names the event
// and the state, and the state does not move.
func TestConnIllegalTransitionIsRefusedLoudly(t *testing.T) {
	var p connPhase
	p.to(evHello)
	from, next, err := p.to(evGenerationAck)
	if err == nil || from != connVerifying || next != connVerifying || p.load() != connVerifying {
		t.Fatalf("generationAck while verifying: (%v, %v, %v), state %v", from, next, err, p.load())
	}
	if got := err.Error(); got != "lane: illegal connection transition: generationAck in state verifying" {
		t.Fatalf("error %q", got)
	}
}

// An attach racing the handshake deadline is decided once: exactly one of
// them moves the connection out of verifying.
func TestConnAttachRacingTheDeadlineIsDecidedOnce(t *testing.T) {
	for range 200 {
		var p connPhase
		p.to(evHello)
		var wg sync.WaitGroup
		var attached, timedOut bool
		wg.Go(func() { _, next, _ := p.to(evAttach); attached = next == connAwaitingAck })
		wg.Go(func() { from, next, _ := p.to(evDeadline); timedOut = from == connVerifying && next == connClosed })
		wg.Wait()
		if attached == timedOut {
			t.Fatalf("attached %v, timed out %v: want exactly one", attached, timedOut)
		}
		if st := p.load(); attached && st != connAwaitingAck || timedOut && st != connClosed {
			t.Fatalf("state %v after attached %v", st, attached)
		}
	}
}

// Every (state, frame type, current) cell of the admission table (§2.4
// stage 2, R9, R10, R15).
func TestConnAdmitEveryFrame(t *testing.T) {
	handle := verdict{action: frameHandle}
	repeat := verdict{action: frameRepeat}
	drop := func(r protocol.GateRejectReason) verdict { return verdict{action: frameDrop, reason: string(r)} }
	preHelloClose := verdict{action: frameClose, reason: string(protocol.GatePreHello)}
	preHello, mismatch := drop(protocol.GatePreHello), drop(protocol.GateGenerationMismatch)
	types := []protocol.DeviceFrameType{protocol.TypeHello, protocol.TypeGenerationAck, protocol.TypeHeartbeat,
		protocol.TypeResult, protocol.TypeChunk, protocol.TypeGoodbye}
	if all := protocol.DeviceFrameTypes(); len(all) != len(types) {
		t.Fatalf("DEVICE_FRAME_TYPES is %q; the table's columns are %q", all, types)
	}
	for _, typ := range protocol.DeviceFrameTypes() {
		if !slices.Contains(types, typ) {
			t.Fatalf("the table has no column for %s", typ)
		}
	}
	type row = [6]verdict
	cases := []struct {
		st      connState
		current bool
		want    row
	}{
		//                                hello     generationAck heartbeat result  chunk   goodbye
		{connHandshaking, false, row{handle, preHelloClose, preHelloClose, preHelloClose, preHelloClose, preHelloClose}},
		{connHandshaking, true, row{handle, preHelloClose, preHelloClose, preHelloClose, preHelloClose, preHelloClose}},
		{connVerifying, false, row{preHello, preHello, preHello, preHello, preHello, preHello}},
		{connVerifying, true, row{preHello, preHello, preHello, preHello, preHello, preHello}},
		{connAwaitingAck, true, row{preHello, handle, handle, handle, handle, handle}},
		{connAwaitingAck, false, row{preHello, mismatch, mismatch, mismatch, mismatch, mismatch}},
		{connActive, true, row{preHello, repeat, handle, handle, handle, handle}},
		{connActive, false, row{preHello, mismatch, mismatch, mismatch, mismatch, mismatch}},
		{connLeaving, true, row{preHello, repeat, handle, handle, handle, repeat}},
		{connLeaving, false, row{preHello, mismatch, mismatch, mismatch, mismatch, mismatch}},
		{connClosed, true, row{preHello, mismatch, mismatch, mismatch, mismatch, mismatch}},
		{connClosed, false, row{preHello, mismatch, mismatch, mismatch, mismatch, mismatch}},
	}
	seen := map[connState]int{}
	for _, c := range cases {
		seen[c.st]++
		for i, typ := range types {
			if got := admit(c.st, typ, c.current); got != c.want[i] {
				t.Errorf("%s in %v (current %v): %+v, want %+v", typ, c.st, c.current, got, c.want[i])
			}
		}
	}
	for st := range connStates {
		if seen[st] != 2 {
			t.Errorf("state %v has %d rows, want 2", st, seen[st])
		}
	}
	// A type outside DEVICE_FRAME_TYPES is refused, in every state.
	for st := range connStates {
		if v := admit(st, "ping", true); v.action == frameHandle || v.action == frameRepeat {
			t.Errorf("an unknown frame type in %v: %+v", st, v)
		}
	}
}

// The membership tests Presence, Metrics and admission ask, one per state.
func TestConnStateMembership(t *testing.T) {
	for _, c := range []struct {
		st                              connState
		online, takesWork, takesCancels bool
	}{
		{connHandshaking, false, false, false},
		{connVerifying, false, false, false},
		{connAwaitingAck, true, true, false},
		{connActive, true, true, true},
		{connLeaving, true, false, true},
		{connClosed, false, false, false},
	} {
		if c.st.online() != c.online || c.st.takesWork() != c.takesWork || c.st.takesCancels() != c.takesCancels {
			t.Errorf("%v: online %v takesWork %v takesCancels %v", c.st, c.st.online(), c.st.takesWork(), c.st.takesCancels())
		}
	}
}
