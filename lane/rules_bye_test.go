package lane_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// revoke revokes a device as its owner does: the registry's row first,
// then the lane ends its connection (R13).
func (r *rig) revoke(fe *fakeExecutor) {
	r.t.Helper()
	if _, err := r.Store().RevokeDevice(r.t.Context(), r.owner, fe.id); err != nil {
		r.t.Fatalf("revoke: %v", err)
	}
	r.Revoke(fe.id)
}

// waitShutdown waits, bounded, for Shutdown's answer.
func waitShutdown(t *testing.T, done <-chan error) {
	t.Helper()
	bound := time.NewTimer(coreWait)
	defer bound.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-bound.C:
		t.Fatal("Shutdown did not return")
	}
}

// R13: the three bye reasons.
func TestR13Bye(t *testing.T) {
	t.Run("revoked", func(t *testing.T) {
		r, fe := connected(t, func(c *lane.Config) { c.MaxInflight = 1 })
		running := r.dispatch(fe, execIn("a"))
		queued := r.dispatch(fe, execIn("b"))
		fe.instructionFor(running.ID)
		r.revoke(fe)
		bye := await[*protocol.Bye](fe, nil)
		if bye.Reason != protocol.ByeRevoked || bye.Gen != fe.gen {
			t.Fatalf("bye %+v", bye)
		}
		fe.expectClosed()
		wantFailure(t, settled(t, running), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		wantFailure(t, settled(t, queued), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
		fe.dial()
		fe.send(fe.helloFrame())
		fe.expectReject(protocol.RejectRevoked)
		if c := r.dispatch(fe, execIn("c")); !isSettled(c) {
			t.Fatal("a dispatch to a revoked device was queued")
		}
	})
	t.Run("revoked while in the reconnect grace", func(t *testing.T) {
		r, fe := connected(t)
		call := fe.start(execIn("a"))
		fe.drop()
		r.revoke(fe)
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "revoked") {
			t.Fatalf("message %q", f.Message)
		}
		fe.dial()
		fe.send(fe.helloFrame())
		fe.expectReject(protocol.RejectRevoked)
	})
	t.Run("draining", func(t *testing.T) {
		r, fe := connected(t)
		call := fe.start(execIn("a"))
		done := make(chan error, 1)
		go func() { done <- r.Shutdown(context.Background()) }()
		bye := await[*protocol.Bye](fe, nil)
		if bye.Reason != protocol.ByeDraining {
			t.Fatalf("bye %+v", bye)
		}
		fe.expectClosed()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		waitShutdown(t, done)
		if _, resp, err := r.dialRaw(); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("dial while draining: %v, want 503", err)
		}
		c := r.dispatch(fe, execIn("b"))
		wantFailure(t, settled(t, c), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	})
	t.Run("superseded by a stale takeover", func(t *testing.T) {
		r, fe := connected(t)
		call := fe.start(execIn("a"))
		// The old socket is judged stale after three missed heartbeats
		// while its own liveness check has not run yet (a sweep that is
		// late), so the takeover, not R14, is what ends it. The new socket
		// is another executor instance.
		old, ack := fe.supersede(true)
		bye := await[*protocol.Bye](old, nil)
		if bye.Reason != protocol.ByeSuperseded || bye.Gen == ack.Gen {
			t.Fatalf("bye %+v to the old socket", bye)
		}
		old.expectClosed()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if len(ack.PendingInstructions) != 0 {
			t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
		}
		fe.send(&protocol.GenerationAck{Gen: fe.gen})
		next := r.dispatch(fe, execIn("b"))
		fe.answerExec(fe.instructionFor(next.ID).InstructionID, 0)
		settled(t, next)
	})
}

// R14: no frame at all for 3 × H closes the connection; any frame refreshes
// liveness; the work in flight enters the reconnect grace.
func TestR14Liveness(t *testing.T) {
	r, fe := connected(t)
	h := r.Config().HeartbeatInterval
	call := fe.start(lane.Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
	// Heartbeats keep a quiet connection alive.
	for i := range 5 {
		r.clk.Advance(h)
		fe.send(&protocol.Heartbeat{Gen: fe.gen, Seq: int64(i), Inflight: []string{call.ID}})
		fe.barrier()
	}
	// Then silence. The lane closes a silent connection in the clock's
	// own step, with its liveness_lost row, which the metrics count as it
	// is made.
	r.clk.Advance(3*h - time.Millisecond)
	if n := r.events(lane.EventLivenessLost); n != 0 {
		t.Fatal("closed before 3 × H of silence")
	}
	r.clk.Advance(time.Millisecond)
	if n := r.events(lane.EventLivenessLost); n != 1 {
		t.Fatalf("%d liveness closes after 3 × H of silence, want 1", n)
	}
	fe.expectClosed()
	r.rec.awaitRows(t, lane.EventDisconnected, fe.id, 1)
	if got := r.rec.count(lane.EventLivenessLost, fe.id); got != 1 {
		t.Fatalf("%d liveness_lost rows", got)
	}
	if isSettled(call) {
		t.Fatalf("settled %+v at the close, before the reconnect grace", settled(t, call))
	}
	r.clk.Advance(r.Config().ReconnectGrace)
	wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
}

// R14 with a configured H: helloAck carries it and the close follows it.
func TestR14HeartbeatIntervalIsConfigurable(t *testing.T) {
	r := newRig(t, func(c *lane.Config) { c.HeartbeatInterval = 100 * time.Millisecond })
	fe := r.enroll()
	if ack := fe.establish(); ack.HeartbeatIntervalMs != 100 {
		t.Fatalf("heartbeatIntervalMs %d", ack.HeartbeatIntervalMs)
	}
	r.clk.Advance(300 * time.Millisecond)
	fe.expectClosed()
}

// R15: after goodbye nothing new is dispatched, results are still
// collected, and the socket closes after graceMs.
func TestR15Goodbye(t *testing.T) {
	r, fe := connected(t, func(c *lane.Config) { c.MaxInflight = 2 })
	a := r.dispatch(fe, execIn("a"))
	b := r.dispatch(fe, execIn("b"))
	queued := r.dispatch(fe, execIn("queued"))
	fe.instructionFor(a.ID)
	fe.instructionFor(b.ID)
	grace := int64(5000)
	fe.send(&protocol.Goodbye{Gen: fe.gen, Reason: protocol.GoodbyeShutdown, GraceMs: &grace})
	fe.barrier()
	// Nothing new starts; what only waited for a slot never reached the device.
	wantFailure(t, settled(t, queued), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	late := r.dispatch(fe, execIn("late"))
	wantFailure(t, settled(t, late), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	// Results keep being collected, and a freed slot is not refilled.
	fe.answerExec(a.ID, 0)
	if s := settled(t, a); !s.Outcome.OK() {
		t.Fatalf("a settled %+v", s)
	}
	none[*protocol.Instruction](t, fe.barrier(), "an instruction after goodbye", nil)
	// The in-flight work can still be cancelled.
	b.Cancel()
	fe.expectCancel(b.ID)
	// Heartbeats still count; presence still shows the connection.
	fe.send(&protocol.Heartbeat{Gen: fe.gen, Seq: 1, Inflight: []string{b.ID}})
	if p := r.Presence(fe.id); !p.Online || !p.Leaving {
		t.Fatalf("presence %+v during the goodbye grace, want online and leaving", p)
	}
	r.clk.Advance(time.Duration(grace)*time.Millisecond - time.Millisecond)
	fe.barrier() // answered: the socket is still open
	r.clk.Advance(time.Millisecond)
	fe.expectClosed()
	// b is still in flight: the ordinary disconnect path (R4) — here the
	// device comes back with the same epoch and answers it, once the lane
	// has let the old socket go.
	r.rec.awaitRows(t, lane.EventDisconnected, fe.id, 1)
	if isSettled(b) {
		t.Fatalf("b settled %+v at the goodbye close", settled(t, b))
	}
	ack := fe.establish()
	if !slices.Equal(ack.PendingInstructions, []string{b.ID}) {
		t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
	}
	fe.expectCancel(b.ID) // still wanted: replayed
	fe.result(b.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
	fe.expectResultAck(b.ID)
	settled(t, b)
}

// R15 without graceMs: the reconnect grace is the default.
func TestR15GoodbyeGraceDefaultsToTheReconnectGrace(t *testing.T) {
	r, fe := connected(t, func(c *lane.Config) { c.ReconnectGrace = 7 * time.Second })
	fe.send(&protocol.Goodbye{Gen: fe.gen, Reason: protocol.GoodbyeSleep})
	fe.barrier()
	r.clk.Advance(7*time.Second - time.Millisecond)
	fe.barrier() // answered: the socket is still open
	r.clk.Advance(time.Millisecond)
	fe.expectClosed()
	r.rec.awaitRows(t, lane.EventDisconnected, fe.id, 1) // written after the goodbye row
	if rows := r.rec.reasons(lane.EventGoodbye, fe.id); !slices.Equal(rows, []string{"sleep"}) {
		t.Fatalf("goodbye audit %v", rows)
	}
}

// Presence (§8): GET /v1/devices shows online, gen, connected since and the
// in-flight count, from this replica.
func TestPresenceInDeviceList(t *testing.T) {
	r := newRig(t)
	fe := r.enroll()
	doors := httpapi.New(r.Server)
	list := func() api.Device {
		t.Helper()
		req := httptest.NewRequest("GET", "/v1/devices", nil)
		req.Header.Set("Authorization", "Bearer "+r.ownerKey)
		w := httptest.NewRecorder()
		doors.ServeHTTP(w, req)
		var body struct {
			Devices []api.Device `json:"devices"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body.Devices) != 1 {
			t.Fatalf("devices: %d %s", w.Code, w.Body)
		}
		return body.Devices[0]
	}
	if d := list(); d.Online || d.Gen != "" || d.Inflight != 0 {
		t.Fatalf("before connecting: %+v", d)
	}
	r.clk.Advance(time.Minute)
	fe.establish()
	a := r.dispatch(fe, execIn("a"))
	b := r.dispatch(fe, execIn("b"))
	fe.instructionFor(a.ID)
	fe.instructionFor(b.ID)
	d := list()
	if !d.Online || d.Gen != fe.gen.String() || d.Inflight != 2 || d.ConnectedSince != api.WireTime(rigStart.Add(time.Minute)) {
		t.Fatalf("connected: %+v (gen %s)", d, fe.gen)
	}
	fe.answerExec(a.ID, 0)
	settled(t, a)
	if d := list(); d.Inflight != 1 {
		t.Fatalf("inflight %d after one settled", d.Inflight)
	}
	fe.drop()
	if d := list(); d.Online {
		t.Fatalf("after the drop: %+v", d)
	}
}

// R13 draining: "reconnect with backoff; a replacement replica will take
// you". Shutdown releases the leases, so the replacement can.
func TestR13DrainingReleasesTheLease(t *testing.T) {
	r, fe := connected(t)
	// The bye is written as Shutdown runs: the device reads it meanwhile.
	done := make(chan error, 1)
	go func() { done <- r.Shutdown(context.Background()) }()
	if bye := await[*protocol.Bye](fe, nil); bye.Reason != protocol.ByeDraining {
		t.Fatalf("bye %+v", bye)
	}
	fe.expectClosed()
	waitShutdown(t, done)
	fe.r = r.replica()
	fe.establish()
}

// R13 superseded: the superseded socket going away does not release the
// lease its successor holds.
func TestR13SupersededSocketLeavesTheNewLease(t *testing.T) {
	r, fe := connected(t)
	old, _ := fe.supersede(false)
	await[*protocol.Bye](old, nil)
	old.expectClosed()
	r.rec.awaitRows(t, lane.EventDisconnected, fe.id, 1)
	// The successor still holds the lease: another replica is refused.
	third := *fe
	third.r = r.replica()
	third.restart()
	third.dial()
	third.send(third.helloFrame())
	third.expectReject(protocol.RejectAlreadyConnected)
}

// The stored lease is renewed by the replica's renewal round; a lease lost
// to someone else closes the connection at the next round.
func TestLeaseLostClosesTheConnection(t *testing.T) {
	const ttl = 51 * time.Second
	r, fe := connected(t, func(c *lane.Config) { c.LeaseTTL = ttl })
	// Someone else takes the lease over from the connection's holder,
	// which the registry names to whoever is refused it.
	steal := store.LeaseRequest{DeviceID: fe.id, Holder: "con_elsewhere", Epoch: ids.ULID(), TTL: time.Minute}
	held, err := r.Store().AcquireLease(t.Context(), steal)
	if !errors.Is(err, store.ErrLeaseHeld) || held.Previous == "" {
		t.Fatalf("the connection's lease: %+v, %v; want it held", held, err)
	}
	steal.Takeover = held.Previous
	if _, err := r.Store().AcquireLease(t.Context(), steal); err != nil {
		t.Fatal(err)
	}
	// The next renewal round, once the renewer has armed its timer.
	if _, ok := r.clk.WaitTimer(t.Context(), func(d time.Duration) bool { return d == ttl/3 }); !ok {
		t.Fatal("the renewer never armed its timer")
	}
	r.clk.Advance(ttl / 3)
	fe.expectClosed()
	r.rec.awaitRows(t, lane.EventDisconnected, fe.id, 1)
	if got := r.rec.count(lane.EventLeaseLost, fe.id); got != 1 {
		t.Fatalf("%d lease_lost rows", got)
	}
}
