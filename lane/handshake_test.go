package lane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// §1.2: the upgrade path is the configured one; anything else is 404.
func TestWSOtherPathsAre404(t *testing.T) {
	l := newWSLane(t)
	for _, p := range []string{"/v1/device/wss", "/v1/device/ws/x", "/v1/device", "/ws"} {
		resp, err := http.Get(l.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	// The configured path moves the endpoint.
	moved := newWSLane(t, func(c *Config) { c.WSPath = "/lane/ws" })
	fd := moved.enroll()
	fd.establish()
	resp, err := http.Get(moved.url + protocol.WSPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("GET %s on a lane at /lane/ws: %d, want 404", protocol.WSPath, resp.StatusCode)
	}
}

// §1.2 / §2.1: handshakeDeadlineMs from socket open to helloAck.
func TestHandshakeDeadline(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.dial()
	l.clk.Advance(protocol.HandshakeDeadline - time.Millisecond)
	fd.send(fd.helloFrame())
	fd.expectHelloAck() // just inside the deadline

	late := l.enroll()
	late.dial()
	l.clk.Advance(protocol.HandshakeDeadline)
	late.expectClosed()
	if got := l.auditReasons(string(EventHandshakeTimeout), ""); len(got) != 1 {
		t.Fatalf("%d handshake_timeout audit rows, want 1", len(got))
	}
	// The established socket is unaffected by its own deadline passing.
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	fd.barrier()
}

func TestHandshakeDeadlineIsConfigurable(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.HandshakeDeadline = 50 * time.Millisecond })
	fd := l.enroll()
	fd.dial()
	l.clk.Advance(50 * time.Millisecond)
	fd.expectClosed()
}

// Each challenge carries a fresh nonce.
func TestChallengeNonceIsFresh(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	seen := map[string]bool{}
	for range 3 {
		ch := fd.dial()
		if seen[ch.Nonce] {
			t.Fatalf("nonce %q served twice", ch.Nonce)
		}
		if raw, err := base64.StdEncoding.DecodeString(ch.Nonce); err != nil || len(raw) < 16 {
			t.Fatalf("nonce %q is not at least 128 random bits", ch.Nonce)
		}
		seen[ch.Nonce] = true
		fd.ws.CloseNow()
	}
}

// §1.4: every helloReject code, each audited, each followed by the close.
func TestHelloRejectCodes(t *testing.T) {
	rejected := func(t *testing.T, l *wsLane, want ...string) {
		t.Helper()
		if got := l.auditReasons(string(EventHelloRejected), ""); !slices.Equal(got, want) {
			t.Fatalf("hello_rejected audit reasons %q, want %q", got, want)
		}
	}
	stranger := func(l *wsLane, id string) *fakeDevice {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		return &fakeDevice{t: l.t, l: l, id: id, priv: priv, epoch: ids.ULID(), supports: defaultSupports}
	}

	t.Run("auth_failed: unknown device", func(t *testing.T) {
		l := newWSLane(t)
		fd := stranger(l, ids.New(ids.Device))
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectAuthFailed)
		rejected(t, l, "auth_failed")
	})
	t.Run("auth_failed: malformed device id", func(t *testing.T) {
		l := newWSLane(t)
		fd := stranger(l, "laptop")
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectAuthFailed)
		rejected(t, l, "auth_failed")
	})
	t.Run("auth_failed: bad signature", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		impostor := stranger(l, fd.id) // the right id, another key
		impostor.dial()
		impostor.send(impostor.helloFrame())
		impostor.expectReject(protocol.RejectAuthFailed)
		// A signature over a different protocol version than the one sent.
		fd.dial()
		h := fd.helloFrame()
		h.ProtocolVersion = 2
		fd.send(h)
		fd.expectReject(protocol.RejectAuthFailed)
		// Not base64, and of the wrong length.
		for _, sig := range []string{"not base64!", base64.StdEncoding.EncodeToString(make([]byte, 63))} {
			fd.dial()
			h := fd.helloFrame()
			h.SignatureB64 = sig
			fd.send(h)
			fd.expectReject(protocol.RejectAuthFailed)
		}
		rejected(t, l, "auth_failed", "auth_failed", "auth_failed", "auth_failed")
	})
	t.Run("auth_failed: malformed epoch", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		good := fd.epoch
		for _, epoch := range []string{strings.ToLower(good), "8" + good[1:], good[:25], good + "0", good[:25] + "I"} {
			fd.dial()
			h := fd.helloFrame() // signed with the good epoch
			h.Epoch = epoch
			fd.send(h)
			fd.expectReject(protocol.RejectAuthFailed)
		}
		rejected(t, l, "auth_failed", "auth_failed", "auth_failed", "auth_failed", "auth_failed")
		// A Z as the last character is just the value 31 (§1.3).
		fd.epoch = good[:25] + "Z"
		fd.establish()
	})
	t.Run("auth_failed: another socket's nonce", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		other, _, err := l.dialRaw()
		if err != nil {
			t.Fatal(err)
		}
		_, b, err := other.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		f, _ := protocol.DecodeServerFrame(protocol.TextMessage, b)
		otherNonce := f.(*protocol.Challenge).Nonce
		fd.dial()
		h := fd.helloFrame()
		fd.sign(h, otherNonce)
		fd.send(h)
		fd.expectReject(protocol.RejectAuthFailed)
		rejected(t, l, "auth_failed")
	})
	t.Run("auth_failed: the registry is unreachable", func(t *testing.T) {
		hooks := &hookStore{}
		l := newWSLane(t, withHooks(hooks))
		fd := l.enroll()
		hooks.setDeviceHook(func(context.Context, string) error { return errors.New("connection refused") })
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectAuthFailed)
		hooks.setDeviceHook(nil)
		rejected(t, l, "auth_failed")
	})
	t.Run("revoked", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		if r := l.do("POST", "/v1/devices/"+fd.id+"/revoke", l.ownerKey, ""); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		fd.dial()
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectRevoked)
		// A bad signature on a revoked device is still only auth_failed.
		impostor := stranger(l, fd.id)
		impostor.dial()
		impostor.send(impostor.helloFrame())
		impostor.expectReject(protocol.RejectAuthFailed)
		rejected(t, l, "revoked", "auth_failed")
	})
	t.Run("protocol_version_unsupported", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		for _, v := range []int{protocol.ProtocolVersion + 1, protocol.MinProtocolVersion - 1} {
			fd.dial()
			h := fd.helloFrame()
			h.ProtocolVersion = v
			fd.sign(h, fd.nonce) // a correct signature over that version
			fd.send(h)
			r := fd.expectReject(protocol.RejectProtocolVersionUnsupported)
			if r.MinProtocolVersion == nil || *r.MinProtocolVersion != protocol.MinProtocolVersion {
				t.Fatalf("version %d: helloReject without minProtocolVersion %d: %+v", v, protocol.MinProtocolVersion, r)
			}
		}
		rejected(t, l, "protocol_version_unsupported", "protocol_version_unsupported")
		// No other code carries minProtocolVersion.
		fd.dial()
		h := fd.helloFrame()
		h.SignatureB64 = base64.StdEncoding.EncodeToString(make([]byte, 64))
		fd.send(h)
		if r := fd.expectReject(protocol.RejectAuthFailed); r.MinProtocolVersion != nil {
			t.Fatalf("auth_failed carries minProtocolVersion")
		}
	})
	t.Run("draining", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.dial() // opened before the drain
		done := make(chan error, 1)
		go func() { done <- l.srv.Shutdown(context.Background()) }()
		eventually(t, "the lane is draining", l.srv.isDraining)
		fd.send(fd.helloFrame())
		fd.expectReject(protocol.RejectDraining)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitBound):
			t.Fatal("Shutdown did not return once the last socket closed")
		}
		rows, err := l.store.AuditEvents(t.Context(), store.AuditFilter{Event: string(EventHelloRejected)})
		if err != nil || len(rows) != 1 || rows[0].Reason != "draining" {
			t.Fatalf("audit rows %+v (%v), want one draining", rows, err)
		}
	})
	t.Run("already_connected", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		second := *fd
		second.restart() // another process: the lease is fresh
		second.dial()
		second.send(second.helloFrame())
		second.expectReject(protocol.RejectAlreadyConnected)
		// The first connection is untouched.
		fd.barrier()
		// A lease held elsewhere (another replica) refuses too.
		other := l.enroll()
		if _, err := l.store.AcquireLease(t.Context(), store.LeaseRequest{DeviceID: other.id, Holder: "con_elsewhere", Epoch: ids.ULID(), TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		other.dial()
		other.send(other.helloFrame())
		other.expectReject(protocol.RejectAlreadyConnected)
		rejected(t, l, "already_connected", "already_connected")
	})
}

// §3.2: kinds the server does not know are ignored; a kind not declared is
// never dispatched.
func TestHelloSupportsUnknownKindsAreIgnored(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll(protocol.KindExec, "teleport")
	fd.establish()
	call := l.dispatch(fd, execInstr("true"))
	in := fd.instructionFor(call.ID)
	fd.answerExec(in.InstructionID, 0)
	if s := settled(t, call); s.State != protocol.StateTerminal || !s.Outcome.OK() {
		t.Fatalf("settlement %+v", s)
	}
}

// §2.4 pre_hello, all three cases.
func TestGatePreHello(t *testing.T) {
	t.Run("a non-hello frame first closes the socket", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.dial()
		fd.send(&protocol.Heartbeat{Gen: 1, Seq: 0})
		fd.expectClosed()
		l.wantRejected("", "pre_hello")
	})
	t.Run("an extra frame during the handshake is dropped, not fatal", func(t *testing.T) {
		hooks := &hookStore{}
		l := newWSLane(t, withHooks(hooks))
		fd := l.enroll()
		entered, release := make(chan struct{}), make(chan struct{})
		hooks.setAcquiredHook(func(store.LeaseRequest) { close(entered); <-release })
		fd.dial()
		fd.send(fd.helloFrame())
		<-entered // the hello is being verified: its lease is being taken
		fd.send(&protocol.GenerationAck{Gen: 1})
		fd.send(fd.helloFrame()) // a second hello is an extra frame too
		l.wantRejected("", "pre_hello", "pre_hello")
		hooks.setAcquiredHook(nil)
		close(release)
		fd.expectHelloAck()
		fd.send(&protocol.GenerationAck{Gen: fd.gen})
		call := l.dispatch(fd, execInstr("true"))
		fd.answerExec(fd.instructionFor(call.ID).InstructionID, 0)
		settled(t, call)
	})
	t.Run("a second hello on an established connection is dropped", func(t *testing.T) {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		fd.send(fd.helloFrame())
		frames := fd.barrier()
		none[*protocol.HelloAck](t, frames, "a second helloAck", nil)
		none[*protocol.HelloReject](t, frames, "a helloReject", nil)
		l.wantRejected(fd.id, "pre_hello")
		if l.current(fd.id) == nil {
			t.Fatal("the connection was dropped")
		}
	})
}

// A socket that closes while its hello is being verified must not leave a
// connection behind: the device can connect again at once.
func TestSocketClosedMidHandshakeLeavesNoConnection(t *testing.T) {
	hooks := &hookStore{}
	l := newWSLane(t, withHooks(hooks))
	fd := l.enroll()
	release := holdHelloAtItsLease(hooks, fd)
	fd.ws.CloseNow()
	eventually(t, "the lane saw the socket close", func() bool {
		l.srv.mu.Lock()
		defer l.srv.mu.Unlock()
		return l.srv.preAuth == 0
	})
	release()
	// The verification attached the closed socket; its cleanup undoes that,
	// lease included (audited last).
	eventually(t, "the closed socket was cleaned up", func() bool {
		return len(l.auditReasons(string(EventDisconnected), fd.id)) == 1
	})
	if l.srv.Presence(fd.id).Online {
		t.Fatal("a closed socket is still the device's connection")
	}
	fd.establish()
}
