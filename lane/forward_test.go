package lane

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"github.com/sema-agent/sema/api"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/protocol"
)

// twoReplicas is two lane replicas on one registry, each reached at its
// own test server; devices connect to a.
func twoReplicas(t *testing.T) (a, b *wsLane) {
	t.Helper()
	a = newWSLane(t, func(c *Config) { c.AdvertiseURL = advertiseSelf })
	b = newWSLane(t, func(c *Config) { c.Store, c.AdvertiseURL = a.store, advertiseSelf })
	return a, b
}

// An instruction posted to a replica that does not hold the device's
// connection is forwarded to the one that does; only the holder sends it,
// and its stream comes back line by line.
func TestAnInstructionPostedToAnyReplicaRunsOnTheHolder(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	fd.establish()
	s, r := b.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"echo hi"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	accepted := s.next() // flushed through the hop before the device has done anything
	in := fd.instruction()
	if accepted["event"] != "accepted" || accepted["instructionId"] != in.InstructionID {
		t.Fatalf("first line %v for instruction %s", accepted, in.InstructionID)
	}
	fd.chunk(in.InstructionID, 0, protocol.ChunkStdout, "hi\n")
	if m := s.next(); m["event"] != "chunk" || m["dataB64"] != "aGkK" {
		t.Fatalf("chunk line %v", m)
	}
	fd.exit(in.InstructionID, 1, 0)
	s.next()
	fd.result(in.InstructionID, 0, protocol.ExecOutcome{ExitCode: 0})
	if m := s.next(); m["event"] != "outcome" || m["state"] != "terminal" {
		t.Fatalf("outcome line %v", m)
	}
	s.end()
	if got := b.doors.Metrics().Forwarded; got != 1 {
		t.Fatalf("b forwarded %d requests; want 1", got)
	}
	if got := a.doors.Metrics().Forwarded; got != 0 {
		t.Fatalf("the holder forwarded %d requests; want 0", got)
	}
}

// A caller hanging up on the forwarding replica cancels on the holder,
// and a cancel posted to either replica reaches the instruction.
func TestCancelsReachTheHolderFromAnyReplica(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	fd.establish()
	s, _ := b.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"sleep 100"},"timeoutMs":100000}`)
	id := s.next()["instructionId"].(string)
	fd.instructionFor(id)
	s.resp.Body.Close()
	fd.expectCancel(id)

	s2, _ := a.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"sleep 100"},"timeoutMs":100000}`)
	id2 := s2.next()["instructionId"].(string)
	fd.instructionFor(id2)
	if got := b.do("POST", "/v1/instructions/"+id2+"/cancel", a.ownerKey, "").Status; got != http.StatusAccepted {
		t.Fatalf("cancel on the other replica: %d; want 202", got)
	}
	fd.expectCancel(id2)
	_, mallory := b.user("mallory")
	if got := b.do("POST", "/v1/instructions/"+id2+"/cancel", mallory, "").Status; got != http.StatusNotFound {
		t.Fatalf("another user's cancel through the other replica: %d; want 404", got)
	}
}

// A device no live replica holds is dispatched where it was posted,
// and settles as a device that is not connected: nothing is forwarded.
func TestADeviceHeldByNoReplicaIsNotForwarded(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	s, r := b.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	s.next()
	if m := s.next(); m["state"] != "terminal_never_started" || m["outcome"].(map[string]any)["errorCode"] != string(protocol.ErrTargetUnavailable) {
		t.Fatalf("outcome %v; want never started, target unavailable", m)
	}
	if got := b.doors.Metrics().Forwarded; got != 0 {
		t.Fatalf("forwarded %d; want 0", got)
	}
}

// A request that claims to be forwarded without the cluster's
// signature is refused, before the caller's key is even looked at.
func TestAForgedHopIsRefused(t *testing.T) {
	a, _ := twoReplicas(t)
	fd := a.enroll()
	req, _ := http.NewRequest("POST", a.url+"/v1/devices/"+fd.id+"/instructions", strings.NewReader(`{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`))
	req.Header.Set("Authorization", "Bearer "+a.ownerKey)
	req.Header.Set(cluster.HeaderFrom, "rep_forged")
	req.Header.Set(cluster.HeaderAt, "1")
	req.Header.Set(cluster.HeaderSignature, "00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged hop: %d; want 403", resp.StatusCode)
	}
}

// GET /v1/devices on any replica reports a device online, at its
// generation, on the replica holding its live lease, with the holder's
// connectedSince and instructions in flight.
func TestPresenceIsTheSameFromAnyReplica(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	idle := a.enroll()
	fd.establish()
	s, _ := a.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"sleep 100"},"timeoutMs":100000}`)
	s.next()
	fd.instruction()
	var since []any
	for _, l := range []*wsLane{a, b} {
		r := l.do("GET", "/v1/devices", a.ownerKey, "")
		devices := r.JSON(t)["devices"].([]any)
		got := map[string]map[string]any{}
		for _, d := range devices {
			m := d.(map[string]any)
			got[m["deviceId"].(string)] = m
		}
		on, off := got[fd.id], got[idle.id]
		if on["online"] != true || on["gen"] != fd.gen.String() || on["replica"] != a.srv.replica || on["inflight"] != 1.0 {
			t.Errorf("%s lists the connected device as %v; want online at gen %s on %s, 1 in flight", l.url, on, fd.gen, a.srv.replica)
		}
		since = append(since, on["connectedSince"])
		if off["online"] != false || off["replica"] != nil {
			t.Errorf("%s lists the idle device as %v; want offline", l.url, off)
		}
	}
	if since[0] == nil || since[0] != since[1] {
		t.Errorf("connectedSince %v on the holder, %v on the other replica; want the holder's on both", since[0], since[1])
	}
}

// A device whose connection dropped with work in flight is offline
// from any replica, though the replica that holds its work keeps its lease
// for the reconnect grace; its work still counts as in flight.
func TestADeviceInItsGraceIsOfflineFromAnyReplica(t *testing.T) {
	a, b := twoReplicas(t)
	droppedWithWorkInFlight(a, "sleep 100")
	for _, l := range []*wsLane{a, b} {
		devices := l.do("GET", "/v1/devices", a.ownerKey, "").JSON(t)["devices"].([]any)
		if m := devices[0].(map[string]any); m["online"] != false || m["inflight"] != 1.0 {
			t.Errorf("%s lists the device in its grace as %v; want offline with 1 in flight", l.url, m)
		}
	}
}

// A replica may ask another for a full page of devices at once (the
// largest page, every device held by the one it asks).
func TestAReplicaMayAskForAFullPageOfPresence(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	fd.establish()
	ask := api.PresenceAsk{DeviceIDs: []string{fd.id}}
	for len(ask.DeviceIDs) < api.MaxDevicePage {
		ask.DeviceIDs = append(ask.DeviceIDs, ids.New(ids.Device))
	}
	body, _ := json.Marshal(ask)
	req, _ := http.NewRequest("POST", a.url+api.PresencePath, bytes.NewReader(body))
	b.srv.hop.Sign(req, "", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var held map[string]api.HeldPresence
	if err := json.NewDecoder(resp.Body).Decode(&held); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a page of %d ids (%d bytes): %d, %v", len(ask.DeviceIDs), len(body), resp.StatusCode, err)
	}
	if len(held) != 1 || !held[fd.id].Online {
		t.Fatalf("answer %v; want the one connected device, online", held)
	}
}

// Only a replica of the cluster may ask for presence.
func TestOnlyAReplicaMayAskForPresence(t *testing.T) {
	a, _ := twoReplicas(t)
	if r := a.do("POST", api.PresencePath, a.ownerKey, `{"deviceIds":[]}`); r.Status != http.StatusForbidden {
		t.Fatalf("an owner's key asking for presence: %d; want 403", r.Status)
	}
}

// A streamed write posted to the replica that does not hold the
// device: the accepted line comes back through the hop before a byte of
// the body is sent, and the body reaches the device whole, in parts.
func TestAStreamedWriteIsForwardedWhileItsBodyArrives(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll(append(defaultSupports, protocol.KindWriteFileExclusive)...)
	fd.establish()
	content := patterned(3<<20 + 5)
	pr, pw := io.Pipe()
	q := "kind=writeFileExclusive&path=/home/u/big.bin&timeoutMs=60000&sha256=" + hexSum(content)
	s, r := b.postWrite(fd.id, a.ownerKey, q, pr, int64(len(content)))
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	accepted := s.next() // nothing of the body has been sent yet
	in := fd.instruction()
	if accepted["instructionId"] != in.InstructionID {
		t.Fatalf("first line %v", accepted)
	}
	go func() {
		pw.Write(content)
		pw.Close()
	}()
	if got := payloadOf(t, fd, in, protocol.DefaultPayloadPartBytes); !bytes.Equal(got, content) {
		t.Fatal("the forwarded payload differs from the body")
	}
	fd.result(in.InstructionID, 0, protocol.WriteOutcome{CanonicalPath: "/home/u/big.bin", Inode: "9", Created: new(true)})
	if m := s.next(); m["event"] != "outcome" || m["state"] != "terminal" {
		t.Fatalf("outcome line %v", m)
	}
	s.end()
}

// runVia posts an exec of true to replica via and answers it from fd
// (connected to whichever replica), and returns the outcome line.
func runVia(t *testing.T, via *wsLane, fd *fakeDevice, key string) map[string]any {
	t.Helper()
	s, r := via.postInstruction(fd.id, key, `{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	id := s.next()["instructionId"].(string)
	fd.instructionFor(id)
	fd.answerExec(id, 0)
	s.next() // the exit chunk
	return s.next()
}

// A replica remembers where a device it forwards for is held. When
// the device has moved, the replica it remembers sends the request back
// unread (421), and the forward follows the registry to the device's new
// replica: the instruction runs there, once, and never on the old one.
func TestAForwardFollowsADeviceThatMoved(t *testing.T) {
	a, b := twoReplicas(t)
	c := newWSLane(t, func(cfg *Config) { cfg.Store, cfg.AdvertiseURL = a.store, advertiseSelf })
	fd := a.enroll()
	fd.establish()
	if m := runVia(t, b, fd, a.ownerKey); m["state"] != "terminal" {
		t.Fatalf("outcome %v", m)
	}
	if replica, _, ok := b.srv.routes.Get(fd.id); !ok || replica != a.srv.replica {
		t.Fatalf("b remembers %q, %v for the device; want a's replica", replica, ok)
	}
	fd.drop()
	fd.l, fd.ws, fd.inbox.Pending = c, nil, nil
	fd.establish()

	if m := runVia(t, b, fd, a.ownerKey); m["state"] != "terminal" {
		t.Fatalf("outcome %v; want the device's answer through its new replica", m)
	}
	if replica, _, ok := b.srv.routes.Get(fd.id); !ok || replica != c.srv.replica {
		t.Fatalf("b remembers %q, %v for the device; want c's replica", replica, ok)
	}
	if got := settledCount(a.srv); got != 1 {
		t.Fatalf("the old replica settled %d instructions; want only the first", got)
	}
	if got := b.doors.Metrics().Forwarded; got != 2 {
		t.Fatalf("b forwarded %d requests; want 2", got)
	}
}

// The registry names a replica that does not hold the device's
// connection (its socket died and the lease is not yet released). The
// replica sends the forward back unread both times it is asked; a small
// instruction then settles where it was posted as not connected, and a
// body too large to send again is refused with nothing dispatched. Neither
// is ever dispatched on the replica the registry names.
func TestAForwardTheHolderSendsBackIsNeverDispatchedThere(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	heldBy(t, a, fd.id, a.srv.replica)

	s, r := b.postInstruction(fd.id, a.ownerKey, `{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`)
	if s == nil {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	s.next()
	if m := s.next(); m["state"] != "terminal_never_started" || m["outcome"].(map[string]any)["errorCode"] != string(protocol.ErrTargetUnavailable) {
		t.Fatalf("outcome %v; want never started, target unavailable", m)
	}

	big := `{"kind":"exec","args":{"command":"true ` + strings.Repeat("x", overReplayLimit) + `"},"timeoutMs":5000}`
	r = b.do("POST", "/v1/devices/"+fd.id+"/instructions", a.ownerKey, big)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "nothing was dispatched") {
		t.Fatalf("a large body sent back: %d %s; want 503, nothing dispatched", r.Status, r.Body)
	}
	if got := settledCount(a.srv); got != 0 {
		t.Fatalf("the replica the registry names settled %d instructions; want nothing dispatched there", got)
	}
	if got := b.doors.Metrics().Forwarded; got != 0 {
		t.Fatalf("b counted %d forwards; want 0 (none was answered by another replica)", got)
	}
}

// A route that names a replica nothing listens at any more is
// forgotten, and the request follows the registry at once.
func TestARouteToAGoneReplicaIsForgotten(t *testing.T) {
	a, b := twoReplicas(t)
	fd := a.enroll()
	fd.establish()
	gone, _ := url.Parse(closedPort(t))
	b.srv.routes.Put(fd.id, "rep_gone", gone)
	if m := runVia(t, b, fd, a.ownerKey); m["state"] != "terminal" {
		t.Fatalf("outcome %v; want the device's answer through its replica", m)
	}
	if replica, _, ok := b.srv.routes.Get(fd.id); !ok || replica != a.srv.replica {
		t.Fatalf("b remembers %q, %v; want a's replica", replica, ok)
	}
}

// settledCount is how many instructions a replica has settled.
func settledCount(s *Server) (n uint64) {
	for _, c := range s.Metrics().Dispatches {
		n += c.Value
	}
	return n
}

// overReplayLimit is the size of a body the HTTP API does not hold for a
// second try when it forwards it (its replayLimit).
const overReplayLimit = 8 << 10

// A rotation of the cluster secret (sema server rotate-cluster-secret)
// never refuses a forward, though replicas read the secrets at their own
// renewal rounds: in each phase the sender b reads them a round before
// the receiver a, and its forward still reaches the device on a. Once it
// is done, a hop signed with the old secret is refused.
func TestForwardsPassThroughARotationOfTheClusterSecret(t *testing.T) {
	a := newWSLane(t, withRenewalTTL, func(c *Config) { c.AdvertiseURL = advertiseSelf })
	b := newWSLane(t, withRenewalTTL, func(c *Config) { c.Store, c.AdvertiseURL = a.store, advertiseSelf })
	fd := a.enroll()
	fd.establish()
	before, err := a.store.ClusterSecrets(t.Context(), "unused")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.RotateClusterSecret(t.Context(), strings.Repeat("r", 43)); err != nil {
		t.Fatal(err)
	}
	round := func(l *wsLane) {
		nextRound(t, l)
		if _, ok := l.clk.WaitTimer(t.Context(), func(d time.Duration) bool { return d == renewalTTL/3 }); !ok {
			t.Fatal("the renewal round did not end")
		}
	}
	db := a.store.(interface{ DB() *sql.DB }).DB()
	for _, back := range []time.Duration{0, renewalTTL, renewalTTL + cluster.HopWindow + time.Second} {
		if _, err := db.ExecContext(t.Context(), `UPDATE cluster_secret SET rotated_ms = rotated_ms - ?`, back.Milliseconds()); err != nil {
			t.Fatal(err)
		}
		round(b) // the sender moves on; the receiver a has not read yet
		if m := runVia(t, b, fd, a.ownerKey); m["state"] != "terminal" {
			t.Fatalf("rotated %v ago, read by the sender only: outcome %v", back, m)
		}
		round(a)
	}
	old, _ := cluster.NewHop(before.Current, b.srv.replica, a.clk.Now) // a live replica, in a's time: only the secret is wrong
	req, _ := http.NewRequest("POST", a.url+"/v1/devices/"+fd.id+"/instructions", strings.NewReader(`{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`))
	req.Header.Set("Authorization", "Bearer "+a.ownerKey)
	old.Sign(req, "192.0.2.7", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a hop signed with the rotated-out secret: %d; want 403", resp.StatusCode)
	}
}
