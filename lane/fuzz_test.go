package lane

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

// fuzzSeeds are the spec's device frames (§2.2, §3.3, §4), good and bad.
// In an input, $GEN becomes the connection's generation, $ID a live
// committed instruction, $MEMO a settled one of this device, $OTHER a
// settled one of another device, and $QUEUED one not yet committed.
var fuzzSeeds = []string{
	`{"t":"generationAck","gen":"$GEN"}`,
	`{"t":"heartbeat","gen":"$GEN","seq":0,"inflight":["$ID"]}`,
	`{"t":"heartbeat","gen":"$GEN","seq":9007199254740991,"inflight":[]}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$ID","streamSeq":0,"kind":"stdout","dataB64":"aGVsbG8K"}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$ID","streamSeq":1,"kind":"stderr","dataB64":""}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$ID","streamSeq":7,"kind":"data","dataB64":"AAEC"}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$ID","streamSeq":2,"kind":"exit","exitCode":0}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$ID","streamSeq":0,"kind":"exit","exitCode":-9007199254740991}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":0,"outcome":{"ok":true,"kind":"exec","exitCode":0,"truncated":{"stdout":true,"stderr":false}}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":1,"outcome":{"ok":false,"errorCode":"outcome_unknown","message":"lost"}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":0,"outcome":{"ok":true,"kind":"cancelled","state":"killed"}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":0,"outcome":{"ok":true,"kind":"stat","info":{"path":"/a","kind":"file","size":1,"mtimeMs":0,"mode":420},"entries":[],"existsValue":true,"canonicalPath":"/a","linkTarget":null}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":0,"outcome":{"ok":true,"kind":"write","canonicalPath":"/a","inode":"12","created":true}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":0,"outcome":{"ok":true,"kind":"void"}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$MEMO","deviceSeq":0,"outcome":{"ok":true,"kind":"read"}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$OTHER","deviceSeq":0,"outcome":{"ok":true,"kind":"read"}}`,
	`{"t":"result","gen":"$GEN","instructionId":"$QUEUED","deviceSeq":0,"outcome":{"ok":true,"kind":"read"}}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$MEMO","streamSeq":0,"kind":"stdout","dataB64":"eA=="}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"$QUEUED","streamSeq":0,"kind":"stdout","dataB64":"eA=="}`,
	`{"t":"chunk","gen":"$GEN","instructionId":"ins_01J8ZQ4T9X7M3K5N6P8R0S2V4W","streamSeq":0,"kind":"stdout","dataB64":"eA=="}`,
	`{"t":"goodbye","gen":"$GEN","reason":"sleep","graceMs":1000}`,
	`{"t":"hello","protocolVersion":1,"deviceId":"dev_01J8ZQ4T9X0000000000000000","epoch":"01J8ZQ4T9X7M3K5N6P8R0S2V4W","signatureB64":"","platform":{"os":"linux","arch":"amd64","executorVersion":"1"},"workspaceRoot":"/w","pathFlavor":"posix","supports":["exec"],"resuming":{"unackedResults":1}}`,
	`{"t":"heartbeat","gen":"0$GEN","seq":0,"inflight":[]}`,
	`{"t":"result","gen":"$GEN","instructionId":"$ID","deviceSeq":0.5,"outcome":{}}`,
	`{"t":"ping"}`,
	`{"t":`,
	`[]`,
	`null`,
	"",
}

// fuzzTB reports failures to the current input's T, and keeps cleanups for
// the end of the whole fuzz run (an F may not be used inside the target).
type fuzzTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (f *fuzzTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fuzzTB) runCleanups() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// fuzzHarness is one established connection of a real lane, kept
// established across inputs, whose socket is drained in the background.
type fuzzHarness struct {
	tb    *fuzzTB
	l     *wsLane
	fd    *fakeDevice
	c     *conn
	live  *Call
	subst [][2][]byte

	drained chan struct{}
	bad     atomic.Value // a server frame the executor would refuse
}

func newFuzzHarness(f *testing.F) *fuzzHarness {
	tb := &fuzzTB{TB: f}
	f.Cleanup(tb.runCleanups)
	l := newWSLane(tb, func(c *Config) { c.MaxInflight = 64 })
	h := &fuzzHarness{tb: tb, l: l, fd: l.enroll()}
	memo, other, queued := ids.New(ids.Instruction), ids.New(ids.Instruction), ids.New(ids.Instruction)
	s := l.srv
	s.callsMu.Lock()
	s.memo.add(memo, h.fd.id)
	s.memo.add(other, ids.New(ids.Device))
	// Tracked but never committed: not in the device's queue, so never sent.
	s.calls[queued] = &Call{ID: queued, DeviceID: h.fd.id, Kind: protocol.KindExec, srv: s, state: protocol.StateQueued,
		notify: make(chan struct{}, 1), done: make(chan struct{})}
	s.callsMu.Unlock()
	h.subst = [][2][]byte{{[]byte("$MEMO"), []byte(memo)}, {[]byte("$OTHER"), []byte(other)}, {[]byte("$QUEUED"), []byte(queued)}}
	h.ready()
	return h
}

// ready makes sure an active connection and a live committed instruction
// exist: an input may legitimately have said goodbye or settled the call.
func (h *fuzzHarness) ready() {
	if h.c == nil || h.c.ctx.Err() != nil || h.l.current(h.fd.id) != h.c || h.l.connState(h.fd.id) != connActive {
		h.reconnect()
	}
	if h.live == nil || isSettled(h.live) {
		h.live = h.l.dispatch(h.fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "fuzz"}, Timeout: time.Hour})
	}
}

// reconnect replaces the connection as an executor would: close, then
// hello again, retrying while the old lease is still being released. (It
// does not wait on the audit trail, which the fuzzer keeps busy.)
func (h *fuzzHarness) reconnect() {
	fd := h.fd
	if h.drained != nil {
		fd.ws.CloseNow()
		<-h.drained
		eventually(fd.t, "the lane dropped the old connection", func() bool { return h.l.current(fd.id) == nil })
	}
	for attempt := 0; ; attempt++ {
		fd.dial()
		fd.send(fd.helloFrame())
		f := fd.next()
		if ack, ok := f.(*protocol.HelloAck); ok {
			fd.gen, fd.ack = ack.Gen, ack
			break
		}
		if r, ok := f.(*protocol.HelloReject); !ok || r.Code != protocol.RejectAlreadyConnected || attempt == 1000 {
			fd.t.Fatalf("reconnecting: %s", describe(f))
		}
		fd.ws.CloseNow()
		time.Sleep(time.Millisecond) // the executor's backoff
	}
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	eventually(fd.t, "the lane processed generationAck", func() bool { return h.l.connState(fd.id) == connActive })
	h.c = h.l.current(fd.id)
	h.drain()
}

// drain reads the device's socket until it closes, holding every frame to
// the executor's decoder.
func (h *fuzzHarness) drain() {
	ws := h.fd.ws
	h.drained = make(chan struct{})
	go func() {
		defer close(h.drained)
		for {
			typ, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if _, err := protocol.DecodeServerFrame(protocol.TextMessage, b); err != nil || typ != websocket.MessageText {
				h.bad.Store(string(b))
			}
		}
	}()
}

func (h *fuzzHarness) input(data []byte) []byte {
	data = bytes.ReplaceAll(data, []byte("$GEN"), []byte(h.c.gen.String()))
	data = bytes.ReplaceAll(data, []byte("$ID"), []byte(h.live.ID))
	for _, s := range h.subst {
		data = bytes.ReplaceAll(data, s[0], s[1])
	}
	return data
}

// FuzzEstablishedFrameIntake feeds arbitrary messages to an established
// connection through the lane's own intake (conn.established: liveness,
// stage 1, stage 2 and the frame's effect). The lane must never panic, and
// after the handshake a message costs at most itself: the connection
// survives every input.
func FuzzEstablishedFrameIntake(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(false, []byte(s))
	}
	f.Add(true, []byte(fuzzSeeds[0]))
	h := newFuzzHarness(f)
	f.Fuzz(func(t *testing.T, binary bool, data []byte) {
		h.tb.TB = t
		h.ready()
		kind := protocol.TextMessage
		if binary {
			kind = protocol.BinaryMessage
		}
		msg := h.input(data)
		h.c.established(kind, msg)
		if h.c.ctx.Err() != nil {
			t.Fatalf("the connection did not survive %q", msg)
		}
		if b := h.bad.Load(); b != nil {
			t.Fatalf("the lane sent a frame the executor must refuse: %.300s", b)
		}
	})
}

// The fuzz seeds through the real socket: each costs at most itself.
func TestEstablishedIntakeSeedsOverTheSocket(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxInflight = 64 })
	fd := l.enroll()
	fd.establish()
	other := l.enroll()
	other.establish()
	memo := l.dispatch(fd, execInstr("memo"))
	fd.answerExec(fd.instructionFor(memo.ID).InstructionID, 0)
	foreign := l.dispatch(other, execInstr("other"))
	other.instructionFor(foreign.ID)
	for _, seed := range fuzzSeeds {
		live := l.dispatch(fd, Instruction{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "x"}, Timeout: time.Hour})
		fd.instructionFor(live.ID)
		r := strings.NewReplacer("$GEN", fd.gen.String(), "$ID", live.ID, "$MEMO", memo.ID, "$OTHER", foreign.ID, "$QUEUED", ids.New(ids.Instruction))
		fd.sendText(r.Replace(seed))
		fd.barrier()
		if l.current(fd.id) == nil {
			t.Fatalf("the connection did not survive %s", seed)
		}
		if l.connState(fd.id) == connLeaving { // the goodbye seed: start over
			fd.drop()
			fd.establish()
		}
		fd.inbox.Pending = nil
	}
}
