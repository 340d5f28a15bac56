package lane

import (
	"context"
	"database/sql"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// heldBy stores a live lease of the device for another replica's holder,
// as a replica that was killed leaves it.
func heldBy(t *testing.T, l *wsLane, deviceID, replica string) {
	t.Helper()
	req := store.LeaseRequest{DeviceID: deviceID, Holder: replica + "/c1", Epoch: "E-old", Replica: replica, TTL: time.Hour}
	if _, err := l.store.AcquireLease(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// silentPort is a loopback address that accepts connections and never
// answers: a replica that is alive to TCP but does not respond.
func silentPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return "http://" + ln.Addr().String()
}

func staleHeartbeat(t *testing.T, l *wsLane, replica string) {
	t.Helper()
	db := l.store.(interface{ DB() *sql.DB }).DB()
	if _, err := db.ExecContext(t.Context(), `UPDATE replicas SET heartbeat_ms = 0 WHERE id = ?`, replica); err != nil {
		t.Fatal(err)
	}
}

// A device that reconnects while another replica still holds its
// lease is let in at once when that replica is gone, and refused
// already_connected, as on one replica, while it may still be live.
func TestALeaseAnotherReplicaHoldsIsTakenOverAtOnceWhenThatReplicaIsGone(t *testing.T) {
	cases := []struct {
		name     string
		replica  func(t *testing.T, l *wsLane) // registers rep_old, or not
		takeOver bool
	}{
		{"its row is gone", func(*testing.T, *wsLane) {}, true},
		{"nothing listens at its address", func(t *testing.T, l *wsLane) {
			l.store.RegisterReplica(t.Context(), "rep_old", closedPort(t))
		}, true},
		{"it does not answer and its heartbeat is stale", func(t *testing.T, l *wsLane) {
			l.store.RegisterReplica(t.Context(), "rep_old", silentPort(t))
			staleHeartbeat(t, l, "rep_old")
		}, true},
		{"it does not answer but its heartbeat is live", func(t *testing.T, l *wsLane) {
			l.store.RegisterReplica(t.Context(), "rep_old", silentPort(t))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newWSLane(t, func(c *Config) { c.AdvertiseURL = advertiseSelf })
			fd := l.enroll()
			tc.replica(t, l)
			heldBy(t, l, fd.id, "rep_old")
			fd.dial()
			fd.send(fd.helloFrame())
			if !tc.takeOver {
				fd.expectReject(protocol.RejectAlreadyConnected)
				return
			}
			if ack := fd.expectHelloAck(); len(ack.PendingInstructions) != 0 {
				t.Fatalf("pendingInstructions %v after a takeover; want none (R2: the old replica's books are not this one's)", ack.PendingInstructions)
			}
			dev, err := l.store.Device(t.Context(), fd.id)
			if err != nil || !dev.Leased || dev.LeaseReplica != l.srv.replica {
				t.Fatalf("device row %+v, %v; want a live lease of this replica", dev, err)
			}
		})
	}
}

// A replica keeps the lease of a connection that is live: a second
// executor instance reaching another replica is refused already_connected,
// and the first connection keeps working.
func TestAReplicaKeepsTheLeaseOfALiveConnection(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	fd.establish()
	twin := *fd
	twin.l, twin.ws, twin.inbox.Pending = b, nil, nil
	twin.dial()
	twin.send(twin.helloFrame())
	twin.expectReject(protocol.RejectAlreadyConnected)
	s, r := a.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	s.next()
	in := fd.instruction()
	fd.answerExec(in.InstructionID, 0)
	s.next() // the exit chunk
	if m := s.next(); m["event"] != "outcome" || m["state"] != "terminal" {
		t.Fatalf("outcome %v; want the live connection's answer", m)
	}
}

// The handover endpoint answers only a replica of the cluster.
func TestOnlyAReplicaMayAskForALease(t *testing.T) {
	a, _ := twoReplicas(t)
	fd := a.enroll()
	fd.establish()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", a.url+"/v1/cluster/devices/"+fd.id+"/handover?holder=x", nil)
	req.Header.Set("Authorization", "Bearer "+a.ownerKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an owner's key asking for a lease: %d; want 403", resp.StatusCode)
	}
	if a.connState(fd.id) != connActive {
		t.Fatalf("the connection is %v after a refused ask; want active", a.connState(fd.id))
	}
}

// R2, replicas: a device whose connection dropped with work in flight and
// that reconnects to another replica lets that work settle at once where
// it was (outcome_unknown: the new connection lists nothing, so the
// executor stopped it), not at the end of the reconnect grace, which
// never moves here.
func TestWorkOnAReplicaTheDeviceLeftSettlesWhenItReconnectsElsewhere(t *testing.T) {
	a, b := twoReplicas(t)
	fd, call := droppedWithWorkInFlight(a, "make deploy")
	fd.l, fd.ws, fd.inbox.Pending = b, nil, nil
	if ack := fd.establish(); len(ack.PendingInstructions) != 0 {
		t.Fatalf("the new replica lists %v pending; it holds none of the device's work", ack.PendingInstructions)
	}
	s := settled(t, call)
	if f, ok := s.Outcome.(protocol.Failure); !ok || f.ErrorCode != protocol.ErrOutcomeUnknown || !strings.Contains(f.Message, "another lane replica") {
		t.Fatalf("settlement %+v, want outcome_unknown naming the other replica", s.Outcome)
	}
}

// R4: the lease a replica keeps for a dropped connection's grace is
// renewed with its others, and released when the grace runs out.
func TestTheLeaseKeptForTheGraceIsReleasedWhenItEnds(t *testing.T) {
	l := newWSLane(t)
	fd, call := droppedWithWorkInFlight(l, "sleep 600")
	leased := func() bool {
		dev, err := l.store.Device(t.Context(), fd.id)
		if err != nil {
			t.Fatal(err)
		}
		return dev.Leased
	}
	if !leased() {
		t.Fatal("the lease was released at the drop; it is kept for the reconnect grace")
	}
	l.clk.Advance(l.srv.cfg.ReconnectGrace)
	if s := settled(t, call); s.Outcome.OK() {
		t.Fatalf("settlement %+v after the grace", s)
	}
	eventually(t, "the kept lease is released", func() bool { return !leased() })
}

// droppedWithWorkInFlight is a device connected to l that was sent command
// and then dropped its connection.
func droppedWithWorkInFlight(l *wsLane, command string) (*fakeDevice, *Call) {
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr(command))
	fd.instructionFor(call.ID)
	fd.drop()
	return fd, call
}
