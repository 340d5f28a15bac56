package lane

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

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
