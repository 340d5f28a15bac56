package lane

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// R13: the three bye reasons.
func TestR13Bye(t *testing.T) {
	t.Run("revoked", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.MaxInflight = 1 })
		fd := l.enroll()
		fd.establish()
		running := l.dispatch(fd, execInstr("a"))
		queued := l.dispatch(fd, execInstr("b"))
		fd.instructionFor(running.ID)
		if r := l.do("POST", "/v1/devices/"+fd.id+"/revoke", l.ownerKey, ""); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		bye := expect[*protocol.Bye](fd, nil)
		if bye.Reason != protocol.ByeRevoked || bye.Gen != fd.gen {
			t.Fatalf("bye %+v", bye)
		}
		fd.expectClosed()
		wantFailure(t, settled(t, running), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		wantFailure(t, settled(t, queued), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectRevoked)
		if c := l.dispatch(fd, execInstr("c")); !isSettled(c) {
			t.Fatal("a dispatch to a revoked device was queued")
		}
	})
	t.Run("revoked while in the reconnect grace", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("a"))
		fd.instructionFor(call.ID)
		fd.drop()
		if r := l.do("POST", "/v1/devices/"+fd.id+"/revoke", l.ownerKey, ""); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		f := wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if !strings.Contains(f.Message, "revoked") {
			t.Fatalf("message %q", f.Message)
		}
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectRevoked)
	})
	t.Run("draining", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("a"))
		fd.instructionFor(call.ID)
		done := make(chan error, 1)
		go func() { done <- l.srv.Shutdown(context.Background()) }()
		bye := expect[*protocol.Bye](fd, nil)
		if bye.Reason != protocol.ByeDraining {
			t.Fatalf("bye %+v", bye)
		}
		fd.expectClosed()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitBound):
			t.Fatal("Shutdown did not return")
		}
		if _, resp, err := l.dialRaw(); err == nil || resp == nil || resp.StatusCode != 503 {
			t.Fatalf("dial while draining: %v, want 503", err)
		}
		c := l.dispatch(fd, execInstr("b"))
		wantFailure(t, settled(t, c), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	})
	t.Run("superseded by a stale takeover", func(t *testing.T) {
		l := newWSLane(t)
		h := l.srv.cfg.HeartbeatInterval
		fd := l.enroll()
		fd.establish()
		call := l.dispatch(fd, execInstr("a"))
		fd.instructionFor(call.ID)
		// The old socket is judged stale after three missed heartbeats.
		// Its own liveness check has not run yet (a sweep that is late):
		// stop it, so the takeover, not R14, is what ends it.
		d := l.device(fd.id)
		d.mu.Lock()
		d.conn.liveness.Stop()
		d.mu.Unlock()
		l.clk.Advance(3 * h)
		other := *fd
		other.restart() // another executor instance
		ack := other.connect()
		bye := expect[*protocol.Bye](fd, nil)
		if bye.Reason != protocol.ByeSuperseded || bye.Gen == ack.Gen {
			t.Fatalf("bye %+v to the old socket", bye)
		}
		fd.expectClosed()
		wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
		if len(ack.PendingInstructions) != 0 {
			t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
		}
		other.send(&protocol.GenerationAck{Gen: other.gen})
		next := l.dispatch(&other, execInstr("b"))
		other.answerExec(other.instructionFor(next.ID).InstructionID, 0)
		settled(t, next)
	})
}

// R14: no frame at all for 3 × H closes the connection; any frame refreshes
// liveness; the work in flight enters the reconnect grace.
func TestR14Liveness(t *testing.T) {
	l := newWSLane(t)
	h := l.srv.cfg.HeartbeatInterval
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
	fd.instructionFor(call.ID)
	c := l.current(fd.id)
	// Heartbeats keep a quiet connection alive.
	for i := range 5 {
		l.clk.Advance(h)
		fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: int64(i), Inflight: []string{call.ID}})
		fd.barrier()
	}
	// Then silence.
	l.clk.Advance(3*h - time.Millisecond)
	if c.ctx.Err() != nil {
		t.Fatal("closed before 3 × H of silence")
	}
	l.clk.Advance(time.Millisecond)
	if c.ctx.Err() == nil {
		t.Fatal("still open after 3 × H of silence")
	}
	fd.expectClosed()
	if got := l.auditReasons(string(EventLivenessLost), fd.id); len(got) != 1 {
		t.Fatalf("%d liveness_lost rows", len(got))
	}
	eventually(t, "the lane cleaned up", func() bool { return l.current(fd.id) == nil })
	l.clk.Advance(l.srv.cfg.ReconnectGrace)
	wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
}

// R14 with a configured H: helloAck carries it and the close follows it.
func TestR14HeartbeatIntervalIsConfigurable(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.HeartbeatInterval = 100 * time.Millisecond })
	fd := l.enroll()
	if ack := fd.establish(); ack.HeartbeatIntervalMs != 100 {
		t.Fatalf("heartbeatIntervalMs %d", ack.HeartbeatIntervalMs)
	}
	l.clk.Advance(300 * time.Millisecond)
	fd.expectClosed()
}

// R15: after goodbye nothing new is dispatched, results are still
// collected, and the socket closes after graceMs.
func TestR15Goodbye(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 2 })
	fd := l.enroll()
	fd.establish()
	a := l.dispatch(fd, execInstr("a"))
	b := l.dispatch(fd, execInstr("b"))
	queued := l.dispatch(fd, execInstr("queued"))
	fd.instructionFor(a.ID)
	fd.instructionFor(b.ID)
	grace := int64(5000)
	fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeShutdown, GraceMs: &grace})
	fd.barrier()
	// Nothing new starts; what only waited for a slot never reached the device.
	wantFailure(t, settled(t, queued), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	late := l.dispatch(fd, execInstr("late"))
	wantFailure(t, settled(t, late), protocol.StateTerminalNeverStarted, protocol.ErrTargetUnavailable)
	// Results keep being collected, and a freed slot is not refilled.
	fd.answerExec(a.ID, 0)
	if s := settled(t, a); !s.Outcome.OK() {
		t.Fatalf("a settled %+v", s)
	}
	none[*protocol.Instruction](t, fd.barrier(), "an instruction after goodbye", nil)
	// The in-flight work can still be cancelled.
	b.Cancel()
	fd.expectCancel(b.ID)
	// Heartbeats still count; presence still shows the connection.
	fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: 1, Inflight: []string{b.ID}})
	if p := l.srv.Presence(fd.id); !p.Online {
		t.Fatal("offline during the goodbye grace")
	}
	c := l.current(fd.id)
	l.clk.Advance(time.Duration(grace)*time.Millisecond - time.Millisecond)
	if c.ctx.Err() != nil {
		t.Fatal("closed before graceMs")
	}
	l.clk.Advance(time.Millisecond)
	fd.expectClosed()
	// b is still in flight: the ordinary disconnect path (R4) — here the
	// device comes back with the same epoch and answers it.
	// Cleaned up: detached, and the lease released (after the detach), or
	// the same-epoch hello below could meet it still held.
	eventually(t, "the lane cleaned up", func() bool { return len(l.auditReasons(string(EventDisconnected), fd.id)) > 0 })
	if isSettled(b) {
		t.Fatalf("b settled %+v at the goodbye close", settled(t, b))
	}
	ack := fd.establish()
	if !slices.Equal(ack.PendingInstructions, []string{b.ID}) {
		t.Fatalf("pendingInstructions %v", ack.PendingInstructions)
	}
	fd.expectCancel(b.ID) // still wanted: replayed
	fd.result(b.ID, 0, protocol.CancelledOutcome{State: protocol.CancelKilled})
	fd.expectResultAck(b.ID)
	settled(t, b)
}

// R15 without graceMs: the reconnect grace is the default.
func TestR15GoodbyeGraceDefaultsToTheReconnectGrace(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.ReconnectGrace = 7 * time.Second })
	fd := l.enroll()
	fd.establish()
	fd.send(&protocol.Goodbye{Gen: fd.gen, Reason: protocol.GoodbyeSleep})
	fd.barrier()
	c := l.current(fd.id)
	l.clk.Advance(7*time.Second - time.Millisecond)
	if c.ctx.Err() != nil {
		t.Fatal("closed before the reconnect grace")
	}
	l.clk.Advance(time.Millisecond)
	fd.expectClosed()
	rows := l.auditReasons(string(EventGoodbye), fd.id)
	if !slices.Equal(rows, []string{"sleep"}) {
		t.Fatalf("goodbye audit %v", rows)
	}
}

// Presence (§8): GET /v1/devices shows online, gen, connected since and the
// in-flight count, from this replica.
func TestPresenceInDeviceList(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	list := func() api.Device {
		t.Helper()
		var body struct {
			Devices []api.Device `json:"devices"`
		}
		r := l.do("GET", "/v1/devices", l.ownerKey, "")
		if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Devices) != 1 {
			t.Fatalf("devices: %d %s", r.Status, r.Body)
		}
		return body.Devices[0]
	}
	if d := list(); d.Online || d.Gen != "" || d.Inflight != 0 {
		t.Fatalf("before connecting: %+v", d)
	}
	l.clk.Advance(time.Minute)
	fd.establish()
	a := l.dispatch(fd, execInstr("a"))
	b := l.dispatch(fd, execInstr("b"))
	fd.instructionFor(a.ID)
	fd.instructionFor(b.ID)
	d := list()
	if !d.Online || d.Gen != fd.gen.String() || d.Inflight != 2 || d.ConnectedSince != api.WireTime(laneStart.Add(time.Minute)) {
		t.Fatalf("connected: %+v (gen %s)", d, fd.gen)
	}
	fd.answerExec(a.ID, 0)
	settled(t, a)
	if d := list(); d.Inflight != 1 {
		t.Fatalf("inflight %d after one settled", d.Inflight)
	}
	fd.drop()
	if d := list(); d.Online {
		t.Fatalf("after the drop: %+v", d)
	}
}

// replica starts another lane server on the same registry, as a replacement
// replica (or the restarted single one) would.
func (l *wsLane) replica() *wsLane {
	l.t.Helper()
	clk := clock.NewFake(laneStart)
	srv, err := New(Config{Store: l.store, Clock: clk, Logger: quietLogger(), DrainGrace: -1})
	if err != nil {
		l.t.Fatal(err)
	}
	hs := httptest.NewServer(NewDoors(srv))
	l.t.Cleanup(func() { srv.Shutdown(context.Background()) })
	l.t.Cleanup(hs.Close)
	tl := &testLane{t: l.t, url: hs.URL, store: l.store, clock: l.clock, srv: srv}
	return &wsLane{testLane: tl, clk: clk, owner: l.owner, ownerKey: l.ownerKey}
}

// R13 draining: "reconnect with backoff; a replacement replica will take
// you". Shutdown releases the leases, so the replacement can.
func TestR13DrainingReleasesTheLease(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	if err := l.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bye := expect[*protocol.Bye](fd, nil); bye.Reason != protocol.ByeDraining {
		t.Fatalf("bye %+v", bye)
	}
	fd.expectClosed()
	fd.l = l.replica()
	fd.establish()
}

// R13 superseded: the superseded socket going away does not release the
// lease its successor holds.
func TestR13SupersededSocketLeavesTheNewLease(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	d := l.device(fd.id)
	d.mu.Lock()
	d.conn.liveness.Stop()
	d.mu.Unlock()
	l.clk.Advance(3 * l.srv.cfg.HeartbeatInterval)
	other := *fd
	other.connect()
	expect[*protocol.Bye](fd, nil)
	fd.expectClosed()
	eventually(t, "the superseded socket was cleaned up", func() bool {
		return len(l.auditReasons(string(EventDisconnected), fd.id)) == 1
	})
	// The successor still holds the lease: another replica is refused.
	third := other
	third.l = l.replica()
	third.restart()
	third.dial()
	third.send(third.helloFrame())
	third.expectReject(protocol.RejectAlreadyConnected)
}

// The stored lease is renewed by the replica's renewal round; a lease lost
// to someone else closes the connection at the next round.
func TestLeaseLostClosesTheConnection(t *testing.T) {
	l := newWSLane(t, withRenewalTTL)
	fd := l.enroll()
	fd.establish()
	c := l.current(fd.id)
	if _, err := l.store.AcquireLease(t.Context(), store.LeaseRequest{DeviceID: fd.id, Holder: "con_elsewhere", Epoch: ids.ULID(), TTL: time.Minute, Takeover: c.holder}); err != nil {
		t.Fatal(err)
	}
	nextRound(t, l)
	fd.expectClosed()
	if got := l.auditReasons(string(EventLeaseLost), fd.id); len(got) != 1 {
		t.Fatalf("%d lease_lost rows", len(got))
	}
}
