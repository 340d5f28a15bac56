package lane_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

// The core through its exported surface alone: a Server with no HTTP API,
// its WebSocket endpoint served over in-memory pipes, a device registered
// straight in the registry, and calls made with Dispatch.

// coreWait bounds every wait: reaching it fails the test.
const coreWait = 10 * time.Second

// pipeListener hands the server the server ends of in-memory pipes.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

// dial is the client's end of a new pipe.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// core is a lane.Server whose WebSocket endpoint is reached over pipes.
type core struct {
	*lane.Server
	pipes *pipeListener
	owner string // the identity the devices belong to
}

func newCore(t *testing.T) *core {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := lane.New(lane.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	owner, _, err := lane.CreateIdentity(t.Context(), st, "owner")
	if err != nil {
		t.Fatal(err)
	}
	return &core{Server: srv, pipes: servePipes(t, srv), owner: owner.ID}
}

// servePipes serves the server's WebSocket endpoint over pipes until the
// test ends, then shuts the server down.
func servePipes(t *testing.T, srv *lane.Server) *pipeListener {
	pipes := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	hs := &http.Server{Handler: http.HandlerFunc(srv.ServeWebSocket)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(pipes)
	}()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		hs.Close()
		<-served
	})
	return pipes
}

// device is a scripted executor on one socket.
type device struct {
	t   *testing.T
	id  string
	ws  *websocket.Conn
	gen protocol.Gen
}

// connect registers a device, dials the core and completes the handshake
// (§1.2–§1.5): challenge, signed hello, helloAck, generationAck.
func (c *core) connect(t *testing.T) *device {
	t.Helper()
	regs, err := lanetest.RegisterDevices(t.Context(), c.Config().Store, c.owner, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), coreWait)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: c.pipes.dial}}
	ws, _, err := websocket.Dial(ctx, "ws://lane"+c.Config().WSPath, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	t.Cleanup(func() { ws.CloseNow() })
	d := &device{t: t, id: regs[0].ID, ws: ws}
	ch, ok := d.next().(*protocol.Challenge)
	if !ok {
		t.Fatal("the first frame is not a challenge")
	}
	h := &protocol.Hello{
		ProtocolVersion: protocol.ProtocolVersion, DeviceID: d.id, Epoch: ids.ULID(),
		Platform:      protocol.Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "core-test"},
		WorkspaceRoot: "/w", PathFlavor: "posix",
		Supports: []protocol.InstructionKind{protocol.KindExec, protocol.KindExecStream},
	}
	payload, err := protocol.HelloSignaturePayload(ch.Nonce, h.DeviceID, h.Epoch, h.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	h.SignatureB64 = base64.StdEncoding.EncodeToString(ed25519.Sign(regs[0].Priv, payload))
	d.send(h)
	ack, ok := d.next().(*protocol.HelloAck)
	if !ok {
		t.Fatal("hello was not answered with helloAck")
	}
	d.gen = ack.Gen
	d.send(&protocol.GenerationAck{Gen: ack.Gen})
	return d
}

func (d *device) send(f protocol.DeviceFrame) {
	d.t.Helper()
	b, err := f.MarshalJSON()
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coreWait)
	defer cancel()
	if err := d.ws.Write(ctx, websocket.MessageText, b); err != nil {
		d.t.Fatalf("write: %v", err)
	}
}

// next reads the next frame the lane sends, which must pass the
// executor's decoder.
func (d *device) next() protocol.ServerFrame {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coreWait)
	defer cancel()
	_, b, err := d.ws.Read(ctx)
	if err != nil {
		d.t.Fatalf("read: %v", err)
	}
	f, err := protocol.DecodeServerFrame(protocol.TextMessage, b)
	if err != nil {
		d.t.Fatalf("the lane sent %s: %v", b, err)
	}
	return f
}

// instruction reads frames until the instruction frame of id.
func (d *device) instruction(id string) {
	d.t.Helper()
	for {
		if in, ok := d.next().(*protocol.Instruction); ok && in.InstructionID == id {
			return
		}
	}
}

// chunkStep is one frame a device sends about an instruction.
type chunkStep struct {
	seq    int64
	kind   protocol.ChunkKind
	data   string
	exit   int
	result protocol.Outcome // when set, the step is the result
}

func out(seq int64, data string) chunkStep {
	return chunkStep{seq: seq, kind: protocol.ChunkStdout, data: data}
}
func exitAt(seq int64, code int) chunkStep {
	return chunkStep{seq: seq, kind: protocol.ChunkExit, exit: code}
}
func resultOf(o protocol.Outcome) chunkStep { return chunkStep{result: o} }

func (d *device) play(id string, s chunkStep) {
	d.t.Helper()
	if s.result != nil {
		d.send(&protocol.Result{Gen: d.gen, InstructionID: id, DeviceSeq: 0, Outcome: s.result})
		return
	}
	d.send(&protocol.Chunk{Gen: d.gen, InstructionID: id, StreamSeq: s.seq, Kind: s.kind, Data: []byte(s.data), ExitCode: s.exit})
}

// drain reads a call's events to its settlement: the output as "kind:data"
// (or "exit:N"), in the order the caller sees it.
func drain(t *testing.T, call *lane.Call) ([]string, lane.Settlement) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), coreWait)
	defer cancel()
	var seen []string
	for {
		e, err := call.Next(ctx)
		if errors.Is(err, io.EOF) {
			t.Fatal("the events ended before the settlement")
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if e.Settled != nil {
			return seen, *e.Settled
		}
		if e.Chunk.Kind == protocol.ChunkExit {
			seen = append(seen, "exit:"+strconv.Itoa(e.Chunk.ExitCode))
		} else {
			seen = append(seen, string(e.Chunk.Kind)+":"+string(e.Chunk.Data))
		}
	}
}

// §4 through Dispatch: chunks reach the caller in streamSeq order, each
// once, whatever order and how many times the device sent them; a stream
// that cannot be reported faithfully settles outcome_unknown.
func TestStreamAcceptance(t *testing.T) {
	ok0 := protocol.ExecOutcome{ExitCode: 0}
	cases := []struct {
		name     string
		steps    []chunkStep
		want     []string // the output the caller reads
		unknown  string   // when set, settles outcome_unknown mentioning it
		exitCode int
	}{
		{name: "in order", steps: []chunkStep{out(0, "a"), out(1, "b"), exitAt(2, 0), resultOf(ok0)},
			want: []string{"stdout:a", "stdout:b", "exit:0"}},
		{name: "out of order", steps: []chunkStep{out(1, "b"), out(0, "a"), exitAt(2, 0), resultOf(ok0)},
			want: []string{"stdout:a", "stdout:b", "exit:0"}},
		{name: "a duplicate is absorbed", steps: []chunkStep{out(0, "a"), out(0, "again"), exitAt(1, 0), resultOf(ok0)},
			want: []string{"stdout:a", "exit:0"}},
		{name: "a buffered duplicate: the first wins", steps: []chunkStep{out(1, "b"), out(1, "again"), out(0, "a"), exitAt(2, 0), resultOf(ok0)},
			want: []string{"stdout:a", "stdout:b", "exit:0"}},
		{name: "exit code carried", steps: []chunkStep{exitAt(0, 3), resultOf(protocol.ExecOutcome{ExitCode: 3})},
			want: []string{"exit:3"}, exitCode: 3},
		{name: "exit missing", steps: []chunkStep{out(0, "a"), resultOf(ok0)}, unknown: "exit chunk"},
		{name: "exit not last", steps: []chunkStep{exitAt(0, 0), out(1, "more")}, unknown: "after the exit chunk"},
		{name: "exit code mismatch", steps: []chunkStep{exitAt(0, 3), resultOf(ok0)}, unknown: "exit chunk says 3"},
		{name: "result with a gap left", steps: []chunkStep{exitAt(1, 0), resultOf(ok0)}, unknown: "streamSeq 0"},
		{name: "a data chunk on exec", steps: []chunkStep{{seq: 0, kind: protocol.ChunkData, data: "d"}}, unknown: "not data"},
	}
	c := newCore(t)
	d := c.connect(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d.t = t
			call, err := c.Dispatch(t.Context(), d.id, lane.Instruction{
				Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Minute,
			})
			if err != nil {
				t.Fatal(err)
			}
			d.instruction(call.ID)
			for _, s := range tc.steps {
				d.play(call.ID, s)
			}
			seen, s := drain(t, call)
			if tc.unknown != "" {
				f, ok := s.Outcome.(protocol.Failure)
				if s.State != protocol.StateTerminal || !ok || f.ErrorCode != protocol.ErrOutcomeUnknown || !strings.Contains(f.Message, tc.unknown) {
					t.Fatalf("settled %+v, want outcome_unknown mentioning %q", s, tc.unknown)
				}
				return
			}
			if !slices.Equal(seen, tc.want) {
				t.Fatalf("the caller read %q, want %q", seen, tc.want)
			}
			if e, ok := s.Outcome.(protocol.ExecOutcome); s.State != protocol.StateTerminal || !ok || e.ExitCode != tc.exitCode {
				t.Fatalf("settled %+v", s)
			}
		})
	}
	d.t = t
}

// Cancel as a caller: a live call of the caller's is cancelled, another's
// is not the caller's, and an id the lane never saw is unknown.
func TestCancelAsACaller(t *testing.T) {
	c := newCore(t)
	d := c.connect(t)
	call, err := c.DispatchAs(t.Context(), d.id, c.owner, lane.Instruction{
		Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "sleep 60"}, Timeout: time.Minute,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.instruction(call.ID)
	if got := c.CancelAs(t.Context(), "idn_someone_else", call.ID); got != lane.CancelNotYours {
		t.Fatalf("another identity's cancel: %v, want CancelNotYours", got)
	}
	if got := c.CancelAs(t.Context(), c.owner, "ins_"+ids.ULID()); got != lane.CancelUnknown {
		t.Fatalf("an unknown id: %v, want CancelUnknown", got)
	}
	if got := c.CancelAs(t.Context(), c.owner, call.ID); got != lane.CancelLive {
		t.Fatalf("the owner's cancel: %v, want CancelLive", got)
	}
	for {
		if cancel, ok := d.next().(*protocol.Cancel); ok && cancel.InstructionID == call.ID {
			break
		}
	}
	d.send(&protocol.Result{Gen: d.gen, InstructionID: call.ID, Outcome: protocol.CancelledOutcome{State: protocol.CancelKilled}})
	if _, s := drain(t, call); s.Outcome.Kind() != protocol.OutcomeCancelled {
		t.Fatalf("settled %+v, want the cancel receipt", s)
	}
	if got := c.CancelAs(t.Context(), c.owner, call.ID); got != lane.CancelSettled {
		t.Fatalf("after the settlement: %v, want CancelSettled", got)
	}
}
