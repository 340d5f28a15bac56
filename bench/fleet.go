package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// The fleet benchmark's devices: registered straight in the
// registry (the enrollment endpoint's rate limit is for people, not for
// fifteen thousand test devices), then each one a goroutine speaking the
// real protocol to a real lane: its own Ed25519 key, the §1.3 signed
// hello, generationAck, and a heartbeat every interval the lane asks for.

// FleetDevice is a registered device and its private key.
type FleetDevice = lanetest.Registered

// RegisterFleet registers n devices of a new identity.
func RegisterFleet(ctx context.Context, st store.Store, n int) ([]FleetDevice, error) {
	idn, err := st.CreateIdentity(ctx, "fleet")
	if err != nil {
		return nil, err
	}
	return lanetest.RegisterDevices(ctx, st, idn.ID, n)
}

// Handshake is one device's connection: how long from its first dial to
// the lane's helloAck, how many upgrades the lane answered 503 (its
// pre-auth caps, §1.2: an executor retries after a pause, so the fleet
// does), or why it did not get in.
type Handshake struct {
	Took time.Duration
	// Admitted is the last attempt's own time, dial to helloAck: the lane's
	// handshake once the caps let the socket in.
	Admitted time.Duration
	Retries  int // upgrades answered 503
	// Redials are dials the lane closed before any answer (its cap on open
	// HTTP connections, --max-http-conns, closes the surplus at once).
	Redials int
	Err     error
}

// ConnectFleet connects every device at once (a burst: all dial together)
// to the lane's WebSocket at wsURL, from the given loopback source
// addresses in turn (nil: the kernel's choice), and keeps each connected
// and heartbeating until ctx ends. It returns when every device has its
// answer; the connections live on.
func ConnectFleet(ctx context.Context, wsURL string, fleet []FleetDevice, sources []net.IP, tlsConf *tls.Config) []Handshake {
	clients := fleetClients(sources, tlsConf)
	out := make([]Handshake, len(fleet))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range fleet {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			h := &out[i]
			for {
				ta := time.Now()
				ws, ack, err := handshake(ctx, wsURL, clients[i%len(clients)], d)
				if (errors.Is(err, errBusy) || errors.Is(err, errClosed)) && time.Since(t0) < handshakeTimeout {
					if errors.Is(err, errBusy) {
						h.Retries++
					} else {
						h.Redials++
					}
					time.Sleep(busyPause())
					continue
				}
				h.Took, h.Admitted, h.Err = time.Since(t0), time.Since(ta), err
				if err == nil {
					go heartbeat(ctx, ws, ack) // until ctx ends
				}
				return
			}
		})
	}
	close(start)
	wg.Wait()
	return out
}

// fleetClients is one HTTP client per source address, trusting tlsConf's
// roots when the lane serves wss:// (nil: plain ws://).
func fleetClients(sources []net.IP, tlsConf *tls.Config) []*http.Client {
	if len(sources) == 0 {
		return []*http.Client{{Transport: &http.Transport{MaxIdleConnsPerHost: -1, TLSClientConfig: tlsConf}}}
	}
	var cs []*http.Client
	for _, ip := range sources {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: time.Minute}
		cs = append(cs, &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: -1, TLSClientConfig: tlsConf}})
	}
	return cs
}

// errBusy is the lane's 503 at the upgrade: too many sockets in the
// handshake now; come back shortly.
var errBusy = errors.New("the lane answered 503 at the upgrade")

// errClosed is a connection the lane closed before answering the upgrade.
var errClosed = errors.New("the lane closed the connection before answering")

// busyPause is a jittered pause before dialing again after a 503, as an
// executor's reconnect backs off.
func busyPause() time.Duration {
	return 50*time.Millisecond + time.Duration(mrand.Int64N(int64(200*time.Millisecond)))
}

// handshakeTimeout bounds one device's way in; the lane's own deadline is
// shorter, so a device it refused is counted as such.
const handshakeTimeout = 2 * time.Minute

func handshake(ctx context.Context, wsURL string, hc *http.Client, d FleetDevice) (*websocket.Conn, *protocol.HelloAck, error) {
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(hctx, wsURL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		switch {
		case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
			return nil, nil, errBusy
		case resp == nil && hctx.Err() == nil:
			return nil, nil, fmt.Errorf("%w: %v", errClosed, err)
		}
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	fail := func(format string, args ...any) (*websocket.Conn, *protocol.HelloAck, error) {
		ws.CloseNow()
		return nil, nil, fmt.Errorf(format, args...)
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	f, err := readServerFrame(hctx, ws)
	if err != nil {
		return fail("challenge: %w", err)
	}
	ch, ok := f.(*protocol.Challenge)
	if !ok {
		return fail("the first frame is %T, not a challenge", f)
	}
	hello := &protocol.Hello{
		ProtocolVersion: protocol.ProtocolVersion, DeviceID: d.ID, Epoch: ids.ULID(),
		Platform:      protocol.Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "bench-fleet"},
		WorkspaceRoot: "/fleet", PathFlavor: "posix", Supports: []protocol.InstructionKind{protocol.KindExec},
	}
	payload, err := protocol.HelloSignaturePayload(ch.Nonce, hello.DeviceID, hello.Epoch, hello.ProtocolVersion)
	if err != nil {
		return fail("%w", err)
	}
	hello.SignatureB64 = base64.StdEncoding.EncodeToString(ed25519.Sign(d.Priv, payload))
	if err := writeFrame(hctx, ws, hello); err != nil {
		return fail("hello: %w", err)
	}
	if f, err = readServerFrame(hctx, ws); err != nil {
		return fail("the answer to hello: %w", err)
	}
	ack, ok := f.(*protocol.HelloAck)
	if !ok {
		return fail("hello answered %s", describeFrame(f))
	}
	if err := writeFrame(hctx, ws, &protocol.GenerationAck{Gen: ack.Gen}); err != nil {
		return fail("generationAck: %w", err)
	}
	return ws, ack, nil
}

// heartbeat keeps an idle device alive (R14) until ctx ends or the socket
// breaks. The lane sends an idle device nothing, so its reads are left to
// CloseRead, which answers pings and closes.
func heartbeat(ctx context.Context, ws *websocket.Conn, ack *protocol.HelloAck) {
	defer ws.CloseNow()
	ctx = ws.CloseRead(ctx)
	t := time.NewTicker(time.Duration(ack.HeartbeatIntervalMs) * time.Millisecond)
	defer t.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-ctx.Done():
			ws.Close(websocket.StatusNormalClosure, "")
			return
		case <-t.C:
		}
		if writeFrame(ctx, ws, &protocol.Heartbeat{Gen: ack.Gen, Seq: seq, Inflight: []string{}}) != nil {
			return
		}
	}
}

func readServerFrame(ctx context.Context, ws *websocket.Conn) (protocol.ServerFrame, error) {
	typ, b, err := ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	kind := protocol.TextMessage
	if typ == websocket.MessageBinary {
		kind = protocol.BinaryMessage
	}
	return protocol.DecodeServerFrame(kind, b)
}

func writeFrame(ctx context.Context, ws *websocket.Conn, f interface{ MarshalJSON() ([]byte, error) }) error {
	b, err := f.MarshalJSON()
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}

// describeFrame names a frame the fleet did not expect (a helloReject's
// code, say).
func describeFrame(f protocol.ServerFrame) string {
	if r, ok := f.(*protocol.HelloReject); ok {
		return "helloReject " + string(r.Code)
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", f), "*protocol.")
}
