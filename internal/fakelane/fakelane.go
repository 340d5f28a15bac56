// Package fakelane is a scripted lane server for the executor's tests: a
// real WebSocket over loopback (httptest), a real GET /v1/capabilities, a
// challenge with a fresh nonce, the hello decoded with the lane's own strict
// decoder under the 4096-byte pre-auth cap and its Ed25519 signature
// verified over protocol.HelloSignaturePayload. After that the test drives
// the socket frame by frame: helloAck or helloReject, instructions,
// payloads, cancels, acks and bye, exactly as §1–§5 of the protocol say.
//
// Everything the device sends after the handshake is decoded with
// protocol.DecodeDeviceFrame (a frame the real lane would refuse fails the
// test) and recorded in a Ledger that spans connections and checks the
// invariants the real lane enforces: the gen of every frame, contiguous
// streamSeq from 0, byte-identical retransmissions, one deviceSeq per
// result, nothing sent for an instruction after it was written off.
package fakelane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/protocol"
)

// Lane is one fake lane replica.
type Lane struct {
	t      testing.TB
	srv    *httptest.Server
	wsPath string
	Ledger *Ledger

	mu      sync.Mutex
	devices map[string]ed25519.PublicKey
	conns   []*Conn
	pending chan *Conn
	dials   int
}

// New starts a lane on loopback, serving its WebSocket on wsPath ("" means a
// non-default path, to prove the executor reads it from capabilities).
func New(t testing.TB, wsPath string) *Lane {
	if wsPath == "" {
		wsPath = "/fake/v1/device/ws"
	}
	l := &Lane{t: t, wsPath: wsPath, Ledger: newLedger(t), devices: map[string]ed25519.PublicKey{}, pending: make(chan *Conn, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/capabilities", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"deviceExecutor": map[string]any{
			"enabled": true, "protocolVersion": protocol.ProtocolVersion, "maxInflightPerDevice": 4,
			"wsPath": l.wsPath, "management": map[string]string{},
		}})
	})
	mux.HandleFunc("GET "+wsPath, l.accept)
	l.srv = httptest.NewServer(mux)
	t.Cleanup(l.Close)
	return l
}

// URL is the lane's base URL (http://127.0.0.1:port).
func (l *Lane) URL() string { return l.srv.URL }

// AddDevice registers a device's public key.
func (l *Lane) AddDevice(id string, pub ed25519.PublicKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.devices[id] = pub
}

// Dials counts the WebSocket upgrades so far.
func (l *Lane) Dials() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dials
}

// Close drops every connection and stops the server.
func (l *Lane) Close() {
	l.mu.Lock()
	conns := l.conns
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	l.srv.Close()
}

func (l *Lane) accept(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	l.mu.Lock()
	l.dials++
	n := l.dials
	l.mu.Unlock()
	c := &Conn{lane: l, ws: ws, N: n, done: make(chan struct{}), readDone: make(chan struct{})}
	nonce := make([]byte, 24)
	rand.Read(nonce)
	c.Nonce = base64.StdEncoding.EncodeToString(nonce)
	ctx, cancel := context.WithTimeout(context.Background(), protocol.HandshakeDeadline)
	defer cancel()
	if err := c.send(ctx, &protocol.Challenge{Nonce: c.Nonce, ProtocolVersion: protocol.ProtocolVersion}); err != nil {
		ws.CloseNow()
		return
	}
	typ, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return
	}
	c.HelloBytes = len(data)
	f, err := protocol.DecodeDeviceFrame(msgKind(typ), data, protocol.MaxPreAuthFrameBytes)
	if err != nil {
		l.t.Errorf("fakelane: the first frame is not a valid pre-auth hello: %v", err)
		ws.CloseNow()
		return
	}
	h, ok := f.(*protocol.Hello)
	if !ok {
		l.t.Errorf("fakelane: the first frame is %s, not hello", f.Type())
		ws.CloseNow()
		return
	}
	c.Hello = h
	l.mu.Lock()
	pub := l.devices[h.DeviceID]
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	if payload, err := protocol.HelloSignaturePayload(c.Nonce, h.DeviceID, h.Epoch, h.ProtocolVersion); err == nil && pub != nil {
		if sig, err := base64.StdEncoding.DecodeString(h.SignatureB64); err == nil {
			c.SignatureOK = ed25519.Verify(pub, payload, sig)
		}
	}
	l.pending <- c
}

// Next waits for the next connection whose hello has arrived.
func (l *Lane) Next(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.pending:
		return c, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fakelane: no connection: %w", context.Cause(ctx))
	}
}

func msgKind(t websocket.MessageType) protocol.MessageKind {
	if t == websocket.MessageText {
		return protocol.TextMessage
	}
	return protocol.BinaryMessage
}

// Conn is one device socket, after its hello.
type Conn struct {
	lane        *Lane
	ws          *websocket.Conn
	N           int // 1 for the first dial, …
	Nonce       string
	Hello       *protocol.Hello
	HelloBytes  int
	SignatureOK bool

	mu       sync.Mutex
	gen      protocol.Gen
	acked    bool // helloAck sent
	byeSent  bool
	autoAck  bool
	frames   []protocol.DeviceFrame
	cond     chan struct{} // closed and replaced when frames grow
	closed   bool
	done     chan struct{}
	readDone chan struct{}
	readErr  error
}

// Ack sends helloAck and starts reading the device's frames. The hello's
// signature must have verified.
func (c *Conn) Ack(gen protocol.Gen, heartbeatMs int64, pending []string, watermarks map[string]int64) error {
	if !c.SignatureOK {
		c.lane.t.Errorf("fakelane: acking a hello whose signature did not verify")
	}
	c.mu.Lock()
	c.gen, c.acked, c.cond = gen, true, make(chan struct{})
	c.mu.Unlock()
	c.lane.Ledger.newGeneration(c, pending)
	err := c.send(context.Background(), &protocol.HelloAck{
		HeartbeatIntervalMs: heartbeatMs, MaxInflight: 4, Gen: gen,
		PendingInstructions: pending, ChunkWatermarks: watermarks,
	})
	go c.readLoop()
	return err
}

// Handshake acks and waits for generationAck, which must be the first frame.
func (c *Conn) Handshake(ctx context.Context, gen protocol.Gen, heartbeatMs int64, pending []string, watermarks map[string]int64) error {
	if err := c.Ack(gen, heartbeatMs, pending, watermarks); err != nil {
		return err
	}
	f, err := c.NextFrame(ctx, 0)
	if err != nil {
		return err
	}
	ga, ok := f.(*protocol.GenerationAck)
	if !ok || ga.Gen != gen {
		return fmt.Errorf("fakelane: the first frame after helloAck is %#v, not generationAck %s", f, gen)
	}
	return nil
}

// Reject sends helloReject and closes the socket.
func (c *Conn) Reject(code protocol.HelloRejectCode, minVersion *int) {
	c.send(context.Background(), &protocol.HelloReject{Code: code, MinProtocolVersion: minVersion})
	c.Close()
}

// Bye sends bye and closes the socket, as the lane does (R13).
func (c *Conn) Bye(reason protocol.ByeReason) {
	c.mu.Lock()
	c.byeSent = true
	gen := c.gen
	c.mu.Unlock()
	c.send(context.Background(), &protocol.Bye{Gen: gen, Reason: reason})
	c.Close()
}

// AutoAck makes the connection ack every chunk (cumulative contiguous
// watermark) and every result as it arrives.
func (c *Conn) AutoAck(on bool) {
	c.mu.Lock()
	c.autoAck = on
	c.mu.Unlock()
}

// Gen is the connection's generation.
func (c *Conn) Gen() protocol.Gen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// Send writes one server frame. ChunkAcks are recorded in the ledger (the
// back-pressure checks measure against them).
func (c *Conn) Send(f protocol.ServerFrame) error {
	if a, ok := f.(*protocol.ChunkAck); ok {
		c.lane.Ledger.laneAcked(a.InstructionID, a.UpToStreamSeq)
	}
	return c.send(context.Background(), f)
}

func (c *Conn) send(ctx context.Context, f protocol.ServerFrame) error {
	b, err := f.MarshalJSON()
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// Close drops the socket (no close handshake: a network drop).
func (c *Conn) Close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	acked := c.acked
	c.mu.Unlock()
	if already {
		return
	}
	close(c.done)
	c.ws.CloseNow()
	if acked {
		<-c.readDone
	}
}

// Closed is closed when Close was called.
func (c *Conn) Closed() <-chan struct{} { return c.done }

// ReadDone is closed when the device side ended the socket (or Close).
func (c *Conn) ReadDone() <-chan struct{} { return c.readDone }

func (c *Conn) readLoop() {
	defer close(c.readDone)
	for {
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			close(c.cond)
			c.cond = make(chan struct{})
			c.mu.Unlock()
			return
		}
		f, err := protocol.DecodeDeviceFrame(msgKind(typ), data, protocol.MaxFrameBytes)
		if err != nil {
			c.lane.t.Errorf("fakelane: the device sent a frame the lane refuses: %v", err)
			continue
		}
		c.mu.Lock()
		bye := c.byeSent
		gen := c.gen
		auto := c.autoAck
		c.frames = append(c.frames, f)
		close(c.cond)
		c.cond = make(chan struct{})
		c.mu.Unlock()
		if bye {
			continue // void (R9)
		}
		ack := c.lane.Ledger.record(c, gen, f)
		if auto && ack != nil {
			c.send(context.Background(), ack)
		}
	}
}

// NextFrame returns the device's i-th frame after helloAck (from 0),
// waiting for it.
func (c *Conn) NextFrame(ctx context.Context, i int) (protocol.DeviceFrame, error) {
	for {
		c.mu.Lock()
		if i < len(c.frames) {
			f := c.frames[i]
			c.mu.Unlock()
			return f, nil
		}
		ch, rerr := c.cond, c.readErr
		c.mu.Unlock()
		if rerr != nil {
			return nil, fmt.Errorf("fakelane: socket ended before frame %d: %w", i, rerr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("fakelane: frame %d never came: %w", i, context.Cause(ctx))
		}
	}
}

// Frames returns every frame read so far after helloAck.
func (c *Conn) Frames() []protocol.DeviceFrame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.DeviceFrame(nil), c.frames...)
}

// WaitFrame waits for a frame matching match, scanning from the start.
func (c *Conn) WaitFrame(ctx context.Context, match func(protocol.DeviceFrame) bool) (protocol.DeviceFrame, error) {
	for i := 0; ; i++ {
		f, err := c.NextFrame(ctx, i)
		if err != nil {
			return nil, err
		}
		if match(f) {
			return f, nil
		}
	}
}

// WaitEnd waits until the device closes the socket.
func (c *Conn) WaitEnd(ctx context.Context) error {
	select {
	case <-c.readDone:
		return nil
	case <-ctx.Done():
		return errors.New("fakelane: the device did not close the socket")
	}
}

// EndCode is the close code the device ended the socket with: -1 while it
// is open, or when it ended without a close frame (a drop).
func (c *Conn) EndCode() websocket.StatusCode {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readErr == nil {
		return -1
	}
	return websocket.CloseStatus(c.readErr)
}

// SendRaw writes b as one text frame, as is: for frames the protocol
// package refuses to encode (an unknown kind, a relative path).
func (c *Conn) SendRaw(b []byte) error {
	return c.ws.Write(context.Background(), websocket.MessageText, b)
}
