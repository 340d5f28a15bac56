package lane

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
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

// §1.2: 503 when the pre-auth connection caps are full, in total and per
// remote address; a socket leaves the count once its handshake completes.
func TestWSPreAuthCapsAnswer503(t *testing.T) {
	wantStatus := func(t *testing.T, l *wsLane, status int) {
		t.Helper()
		_, resp, err := l.dialRaw()
		if status == 101 {
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			return
		}
		if err == nil || resp == nil || resp.StatusCode != status {
			got := 0
			if resp != nil {
				got = resp.StatusCode
			}
			t.Fatalf("dial: %v (status %d), want status %d", err, got, status)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
	}
	t.Run("total", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.MaxPreAuth = 2 })
		a, b := l.enroll(), l.enroll()
		a.dial()
		b.dial()
		wantStatus(t, l, 503)
		a.send(a.helloFrame())
		a.expectHelloAck()
		wantStatus(t, l, 101)
	})
	t.Run("per remote address", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.MaxPreAuthPerAddr = 1 })
		a := l.enroll()
		a.dial()
		wantStatus(t, l, 503)
		a.send(a.helloFrame())
		a.expectHelloAck()
		wantStatus(t, l, 101)
	})
	t.Run("a refused hello frees its slot", func(t *testing.T) {
		l := newWSLane(t, func(c *Config) { c.MaxPreAuth = 1 })
		a := l.enroll()
		a.dial()
		a.sendText(`{"t":"heartbeat","gen":"1","seq":0,"inflight":[]}`)
		a.expectClosed()
		eventually(t, "the pre-auth slot is free", func() bool {
			l.srv.mu.Lock()
			defer l.srv.mu.Unlock()
			return l.srv.preAuth == 0
		})
		a.establish()
	})
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

// §2.4 stage 1 before the handshake: every malformed frame is refused,
// audited, and closes the socket.
func TestStage1BeforeHandshakeClosesTheSocket(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	tooLarge := `{"t":"hello","pad":"` + strings.Repeat("x", protocol.MaxPreAuthFrameBytes) + `"}`
	cases := []struct {
		name   string
		typ    websocket.MessageType
		data   string
		reason protocol.FrameRejectReason
	}{
		{"over the 4096-byte pre-auth cap", websocket.MessageText, tooLarge, protocol.ReasonFrameTooLarge},
		{"binary", websocket.MessageBinary, `{"t":"hello"}`, protocol.ReasonNotJSON},
		{"not JSON", websocket.MessageText, `{"t":`, protocol.ReasonNotJSON},
		{"not an object", websocket.MessageText, `["hello"]`, protocol.ReasonNotObject},
		{"no t", websocket.MessageText, `{"deviceId":"dev_x"}`, protocol.ReasonUnknownType},
		{"unknown t", websocket.MessageText, `{"t":"helo"}`, protocol.ReasonUnknownType},
		{"bad shape", websocket.MessageText, `{"t":"hello","protocolVersion":1}`, protocol.ReasonBadShape},
	}
	var want []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fd.dial()
			fd.sendRaw(c.typ, []byte(c.data))
			fd.expectClosed()
			want = append(want, string(c.reason))
			l.wantRejected("", want...)
		})
	}
	// A hello of exactly 4096 bytes (unknown members are ignored) fits.
	fd.dial()
	h, _ := fd.helloFrame().MarshalJSON()
	pad := protocol.MaxPreAuthFrameBytes - len(h) - len(`,"pad":""`)
	exact := append(h[:len(h)-1:len(h)-1], `,"pad":"`+strings.Repeat("p", pad)+`"}`...)
	if len(exact) != protocol.MaxPreAuthFrameBytes {
		t.Fatalf("built a %d-byte hello", len(exact))
	}
	fd.sendRaw(websocket.MessageText, exact)
	fd.expectHelloAck()
}

// §2.1: the pre-auth cap bounds what an unauthenticated socket makes the
// lane hold, not only what it accepts. A message that goes on past 4096
// bytes is refused (audited frame_too_large, closed 1009) as soon as its
// 4097th byte arrives, without waiting for the rest of it: a socket that
// declares a message of 1 MiB and stalls holds no more than the cap.
func TestPreAuthFrameIsRefusedAtItsCapNotAtItsEnd(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.dial()
	w, err := fd.ws.Writer(t.Context(), websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	// A fragment well past the cap (the client buffers a fragment's tail
	// until its next write); the message's final fragment never comes.
	if _, err := w.Write(bytes.Repeat([]byte("x"), 4*protocol.MaxPreAuthFrameBytes)); err != nil {
		t.Fatal(err)
	}
	if err := fd.expectClosed(); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("closed with %v, want 1009", err)
	}
	l.wantRejected("", string(protocol.ReasonFrameTooLarge))
}

// §2.4 stage 0: a message over 1 MiB is the transport's: close 1009; the
// in-flight work takes the disconnect path.
func TestStage0OverOneMiBCloses1009(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	over := bytes.Repeat([]byte("x"), protocol.MaxFrameBytes+1)

	// Before the handshake such a message is refused at the pre-auth cap,
	// with 1009 too (TestPreAuthFrameIsRefusedAtItsCapNotAtItsEnd).
	fd.establish()
	call := l.dispatch(fd, execInstr("sleep 1"))
	fd.instructionFor(call.ID)
	// Exactly 1 MiB is still a frame: a heartbeat padded with an unknown member.
	hb := fmt.Sprintf(`{"t":"heartbeat","gen":"%s","seq":0,"inflight":[],"pad":"`, fd.gen)
	exact := hb + strings.Repeat("p", protocol.MaxFrameBytes-len(hb)-2) + `"}`
	fd.sendText(exact)
	fd.barrier()
	fd.sendRaw(websocket.MessageText, over)
	if err := fd.expectClosed(); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("established: closed with %v, want 1009", err)
	}
	eventually(t, "the lane noticed the close", func() bool { return l.current(fd.id) == nil })
	if l.callState(call) != protocol.StateDispatchCommitted {
		t.Fatal("the in-flight call did not wait for the reconnect grace")
	}
	l.clk.Advance(l.srv.cfg.ReconnectGrace)
	wantFailure(t, settled(t, call), protocol.StateTerminal, protocol.ErrOutcomeUnknown)
}

// §2.4: after the handshake a malformed frame costs the frame, not the
// connection; each refusal is audited with the device.
func TestStage1AfterHandshakeCostsOnlyTheFrame(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("echo"))
	id := fd.instructionFor(call.ID).InstructionID
	g := fd.gen.String()
	cases := []struct {
		name   string
		typ    websocket.MessageType
		data   string
		reason protocol.FrameRejectReason
	}{
		{"binary", websocket.MessageBinary, `{"t":"heartbeat","gen":"` + g + `","seq":0,"inflight":[]}`, protocol.ReasonNotJSON},
		{"not JSON", websocket.MessageText, `{"t":"heartbeat",`, protocol.ReasonNotJSON},
		{"not an object", websocket.MessageText, `"heartbeat"`, protocol.ReasonNotObject},
		{"no t", websocket.MessageText, `{"gen":"` + g + `"}`, protocol.ReasonUnknownType},
		{"a server frame type", websocket.MessageText, `{"t":"resultAck","gen":"` + g + `","instructionId":"` + id + `"}`, protocol.ReasonUnknownType},
		{"non-canonical gen", websocket.MessageText, `{"t":"heartbeat","gen":"0` + g + `","seq":0,"inflight":[]}`, protocol.ReasonBadShape},
		{"numeric gen", websocket.MessageText, `{"t":"heartbeat","gen":` + g + `,"seq":0,"inflight":[]}`, protocol.ReasonBadShape},
		{"float deviceSeq", websocket.MessageText, `{"t":"result","gen":"` + g + `","instructionId":"` + id + `","deviceSeq":1.5,"outcome":{"ok":true,"kind":"exec","exitCode":0}}`, protocol.ReasonBadShape},
		{"URL-safe dataB64", websocket.MessageText, `{"t":"chunk","gen":"` + g + `","instructionId":"` + id + `","streamSeq":0,"kind":"stdout","dataB64":"-_8="}`, protocol.ReasonBadShape},
		{"exit chunk with data", websocket.MessageText, `{"t":"chunk","gen":"` + g + `","instructionId":"` + id + `","streamSeq":0,"kind":"exit","exitCode":0,"dataB64":""}`, protocol.ReasonBadShape},
		{"repeated member", websocket.MessageText, `{"t":"heartbeat","gen":"` + g + `","gen":"` + g + `","seq":0,"inflight":[]}`, protocol.ReasonBadShape},
	}
	var want []string
	for _, c := range cases {
		fd.sendRaw(c.typ, []byte(c.data))
		want = append(want, string(c.reason))
	}
	frames := fd.barrier() // the connection survives every one of them
	none[*protocol.ChunkAck](t, frames, "chunkAck for a refused chunk", nil)
	none[*protocol.ResultAck](t, frames, "resultAck for a refused result", func(a *protocol.ResultAck) bool { return a.InstructionID == id })
	l.wantRejected(fd.id, want...)
	// A frame over the pre-auth cap is an ordinary frame now.
	inflight := make([]string, 200)
	for i := range inflight {
		inflight[i] = ids.New(ids.Instruction)
	}
	fd.send(&protocol.Heartbeat{Gen: fd.gen, Seq: 1, Inflight: inflight})
	fd.barrier()
	l.wantRejected(fd.id, want...)
	// The instruction was never disturbed.
	fd.answerExec(id, 0)
	if s := settled(t, call); !s.Outcome.OK() {
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

// §1.2's pre-auth caps without a lockout: when sockets that have sent no
// hello fill the global cap, a socket from an address holding fewer of them
// than the address holding the most (by two or more) closes that address's
// oldest, audited device.upgrade_refused preauth_evicted, and is let in. So
// addresses flooding the cap (each within the per-address cap) cannot keep
// a device out; a flooding address cannot push out its peers.
func TestPreAuthCapFullOfSilentSocketsLetsAnotherAddressIn(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxPreAuth, c.MaxPreAuthPerAddr = 3, 3 })
	flood := net.IPv4(127, 0, 0, 2)
	dialFrom := func(ip net.IP) (*websocket.Conn, int) {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, l.wsURL(), &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			if resp == nil {
				t.Skipf("no second loopback address here: %v", err)
			}
			return nil, resp.StatusCode
		}
		t.Cleanup(func() { ws.CloseNow() })
		return ws, 101
	}
	var silent []*lanetest.Inbox
	for range 3 {
		ws, st := dialFrom(flood)
		if st != 101 {
			t.Fatalf("flood socket: %d", st)
		}
		in := &lanetest.Inbox{WS: ws}
		in.Next(t) // its challenge: the lane has listed it (the order of age)
		silent = append(silent, in)
	}
	fd := l.enroll()
	fd.dial() // from 127.0.0.1: the flood's oldest makes room
	silent[0].ExpectClosed(t)
	var rows []store.AuditEvent
	eventually(t, "the eviction's audit row", func() bool {
		rows = l.auditRows(store.AuditFilter{Event: string(EventUpgradeRefused)})
		return len(rows) > 0
	})
	if len(rows) != 1 || rows[0].Reason != "preauth_evicted" || rows[0].RemoteAddr != "127.0.0.2" {
		t.Fatalf("audited %+v", rows)
	}
	// The flood holds 2 sockets, not two more than the device's address: at
	// the cap its next one is refused, and the device's handshake goes on.
	if _, st := dialFrom(flood); st != http.StatusServiceUnavailable {
		t.Fatalf("another flood socket at the cap: %d, want 503", st)
	}
	fd.send(fd.helloFrame())
	fd.expectHelloAck()
}
