package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The fault-injecting proxy: a loopback TCP proxy between the executor and
// the lane. Plain HTTP (capabilities, enrollment) is piped through as it is;
// a WebSocket upgrade is followed into its frames, and every frame in either
// direction is shown to the current fault before it is forwarded. A fault
// can forward it, swallow it, or cut the connection before, after or in the
// middle of it. A cut is a drop as both ends see it: each gets every byte
// forwarded before the cut, then end-of-stream.
//
// The proxy also keeps the books the invariants are checked against: every
// frame it saw, and how many instruction frames the lane wrote per
// instruction id (R1: never more than one), whether or not they were
// forwarded.

// dir is a frame's direction.
type dir int

const (
	toLane   dir = iota // device → lane
	toDevice            // lane → device
)

func (d dir) String() string {
	if d == toLane {
		return "→lane"
	}
	return "→device"
}

// action is what the proxy does with one frame.
type action int

const (
	forward   action = iota
	drop             // swallow the frame, keep the connection
	cutBefore        // drop the connection; the frame is lost
	cutAfter         // forward the frame, then drop the connection
	cutMid           // forward half of the frame's bytes, then drop the connection
	halfOpen         // the device sees end-of-stream; the lane's socket stays open and silent
)

func (a action) String() string {
	return [...]string{"forward", "drop", "cutBefore", "cutAfter", "cutMid", "halfOpen"}[a]
}

func (a action) cuts() bool { return a == cutBefore || a == cutAfter || a == cutMid || a == halfOpen }

// frame is one WebSocket frame as the proxy saw it. For a text frame the
// protocol fields are parsed from its JSON.
type frame struct {
	Conn   int // the WebSocket connection, from 1
	Dir    dir
	Opcode byte
	T      string // the frame type ("hello", "instruction", "chunk" …)
	ID     string // instructionId
	Part   string // payload part
	Kind   string // chunk kind or instruction kind
	Seq    int64  // streamSeq, upToStreamSeq; -1 when absent
	Reason string // bye, goodbye
	Code   string // helloReject
	Gen    string
	// Pending is helloAck's pendingInstructions.
	Pending []string
	// Body is what a retransmission must repeat exactly: a chunk's kind,
	// data and exit code; a result's deviceSeq and outcome.
	Body   string
	Bytes  int // payload bytes on the wire
	Action action
}

func (f frame) String() string {
	return fmt.Sprintf("#%d %s %s id=%s part=%s kind=%s seq=%d %s", f.Conn, f.Dir, f.T, f.ID, f.Part, f.Kind, f.Seq, f.Action)
}

// fault decides the fate of one frame. It runs on the proxy's pump
// goroutine, outside the proxy's lock: it may call into the lane.
type fault func(f *frame) action

type proxy struct {
	t  testing.TB
	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	target  string
	blocked bool
	fault   fault
	nconn   int
	live    map[*pconn]struct{}
	log     []frame
	instr   map[string]int // instruction frames the lane wrote, per id
	// sent is the first copy of every chunk and result the device sent;
	// retransmit lists the re-sends that differed from it.
	sent       map[string]string
	retransmit []string
	resent     int // re-sends compared
	cuts       int
	lastCut    int // the connection of the last cut
	closed     bool
	accepts    int // TCP connections accepted (refused ones included)
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, live: map[*pconn]struct{}{}, instr: map[string]int{}, sent: map[string]string{}}
	p.wg.Add(1)
	go p.accept()
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

// setTarget points new connections at another upstream (a restarted lane).
func (p *proxy) setTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// setFault installs f for every frame from now on (nil forwards all).
func (p *proxy) setFault(f fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// block refuses new connections (they are closed on accept) until unblock:
// the executor stays offline while the test changes the world.
func (p *proxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
}

func (p *proxy) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}

// halfOpenAll leaves every live WebSocket half-open, on demand.
func (p *proxy) halfOpenAll() {
	p.mu.Lock()
	var cs []*pconn
	for c := range p.live {
		if c.n > 0 {
			cs = append(cs, c)
			p.cuts++
			p.lastCut = max(p.lastCut, c.n)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.halfOpen()
	}
}

// cutAll drops every live connection, on demand.
func (p *proxy) cutAll() {
	p.mu.Lock()
	var cs []*pconn
	for c := range p.live {
		cs = append(cs, c)
		if c.n > 0 {
			p.cuts++
			p.lastCut = max(p.lastCut, c.n)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.cut()
	}
}

// close stops the proxy and ends every connection at once.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	var cs []*pconn
	for c := range p.live {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range cs {
		c.kill()
	}
	p.wg.Wait()
}

// frames returns a copy of the frame log.
func (p *proxy) frames() []frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]frame(nil), p.log...)
}

// count counts logged frames matching pred.
func (p *proxy) count(pred func(frame) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, f := range p.log {
		if pred(f) {
			n++
		}
	}
	return n
}

// instructionFrames returns how many instruction frames the lane wrote for
// each instruction id.
func (p *proxy) instructionFrames() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.instr))
	for k, v := range p.instr {
		out[k] = v
	}
	return out
}

func (p *proxy) cutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *proxy) lastCutConn() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastCut
}

func (p *proxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nconn
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		refuse := p.blocked || p.closed
		target := p.target
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c.(*net.TCPConn), target)
		}()
	}
}

// pconn is one proxied TCP connection.
type pconn struct {
	p        *proxy
	dev, up  *net.TCPConn
	n        int // WebSocket connection number; 0 for plain HTTP
	cutOnce  sync.Once
	isCut    atomic.Bool
	half     atomic.Bool // half-open: the lane's side is left open
	killOnce sync.Once
}

// halfOpen drops the connection on the device's side only: the device gets
// end-of-stream, while the lane's socket stays open and hears nothing more,
// as after a network failure nobody was told about. The lane finds out by
// its liveness rule (R14), or when a new connection supersedes this one.
func (c *pconn) halfOpen() {
	c.half.Store(true)
	c.isCut.Store(true)
	c.dev.CloseWrite()
	c.dev.SetReadDeadline(time.Now().Add(5 * time.Second))
}

// cut drops the connection as both ends see it: end-of-stream after every
// byte already forwarded (FIN, not RST: a reset could destroy bytes the
// peer has received but not yet read). What either end still sends is
// read and discarded until it closes.
func (c *pconn) cut() {
	c.cutOnce.Do(func() {
		c.isCut.Store(true)
		c.dev.CloseWrite()
		c.up.CloseWrite()
		// Neither end gets forever to notice.
		deadline := time.Now().Add(5 * time.Second)
		c.dev.SetReadDeadline(deadline)
		c.up.SetReadDeadline(deadline)
	})
}

// kill ends the connection now.
func (c *pconn) kill() {
	c.killOnce.Do(func() {
		c.isCut.Store(true)
		c.dev.Close()
		c.up.Close()
	})
}

func (p *proxy) handle(dev *net.TCPConn, target string) {
	upc, err := net.Dial("tcp", target)
	if err != nil {
		dev.Close()
		return
	}
	c := &pconn{p: p, dev: dev, up: upc.(*net.TCPConn)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.kill()
		return
	}
	p.live[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.live, c)
		p.mu.Unlock()
		c.kill()
	}()

	devR, upR := bufio.NewReaderSize(dev, 64<<10), bufio.NewReaderSize(c.up, 64<<10)
	head, err := readHead(devR)
	if err != nil {
		return
	}
	if _, err := c.up.Write(head); err != nil {
		return
	}
	if !bytes.Contains(bytes.ToLower(head), []byte("upgrade: websocket")) {
		pipe(c, devR, upR) // plain HTTP: capabilities, enrollment, revoke
		return
	}
	resp, err := readHead(upR)
	if err != nil {
		return
	}
	if _, err := dev.Write(resp); err != nil {
		return
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101")) {
		pipe(c, devR, upR) // the upgrade was refused (503 while draining)
		return
	}
	p.mu.Lock()
	p.nconn++
	c.n = p.nconn
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.pump(c, devR, c.up, toLane)
	}()
	go func() {
		defer wg.Done()
		p.pump(c, upR, dev, toDevice)
	}()
	wg.Wait()
}

// pipe copies both ways until both ends are done.
func pipe(c *pconn, devR, upR io.Reader) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(c.up, devR)
		c.up.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		io.Copy(c.dev, upR)
		c.dev.CloseWrite()
	}()
	wg.Wait()
}

// readHead reads an HTTP message head through the blank line.
func readHead(r *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		line, err := r.ReadSlice('\n')
		head = append(head, line...)
		if err != nil {
			return nil, err
		}
		if len(head) > 64<<10 {
			return nil, errors.New("head too long")
		}
		if bytes.Equal(line, []byte("\r\n")) {
			return head, nil
		}
	}
}

// pump moves frames from src to dst, each through the fault. After a cut it
// reads and discards until src ends.
func (p *proxy) pump(c *pconn, src *bufio.Reader, dst *net.TCPConn, d dir) {
	for {
		raw, hdrLen, f, err := readWSFrame(src)
		if err != nil {
			if d == toLane && c.half.Load() {
				return // the device is gone; the lane must not hear of it
			}
			// The sender is gone: so is the connection, both ways.
			c.cut()
			return
		}
		if c.isCut.Load() {
			continue
		}
		f.Conn, f.Dir = c.n, d
		act := p.decide(&f)
		switch act {
		case forward:
			_, err = dst.Write(raw)
		case drop:
		case cutBefore:
		case cutAfter:
			_, err = dst.Write(raw)
		case cutMid:
			_, err = dst.Write(raw[:hdrLen+(len(raw)-hdrLen)/2])
		}
		switch {
		case act == halfOpen:
			c.halfOpen()
		case act.cuts() || err != nil:
			c.cut()
		}
	}
}

// decide asks the fault and logs the frame with its fate.
func (p *proxy) decide(f *frame) action {
	p.mu.Lock()
	fl := p.fault
	p.mu.Unlock()
	act := forward
	if fl != nil {
		act = fl(f)
	}
	f.Action = act
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, *f)
	if f.Dir == toDevice && f.T == "instruction" {
		p.instr[f.ID]++
	}
	if f.Dir == toLane && f.Body != "" && (f.T == "chunk" || f.T == "result") {
		key := fmt.Sprintf("%s %s %d", f.T, f.ID, f.Seq)
		if first, ok := p.sent[key]; !ok {
			p.sent[key] = f.Body
		} else if p.resent++; first != f.Body {
			p.retransmit = append(p.retransmit, fmt.Sprintf("%s: first %q, again %q", key, clipped(first), clipped(f.Body)))
		}
	}
	if act.cuts() {
		p.cuts++
		p.lastCut = max(p.lastCut, f.Conn)
	}
	return act
}

// readWSFrame reads one WebSocket frame (RFC 6455 §5.2) and returns its raw
// bytes, the header length, and what it says.
func readWSFrame(r *bufio.Reader) ([]byte, int, frame, error) {
	var f frame
	f.Seq = -1
	var h [14]byte
	if _, err := io.ReadFull(r, h[:2]); err != nil {
		return nil, 0, f, err
	}
	f.Opcode = h[0] & 0x0f
	masked := h[1]&0x80 != 0
	n := uint64(h[1] & 0x7f)
	hl := 2
	switch n {
	case 126:
		if _, err := io.ReadFull(r, h[2:4]); err != nil {
			return nil, 0, f, err
		}
		n, hl = uint64(binary.BigEndian.Uint16(h[2:4])), 4
	case 127:
		if _, err := io.ReadFull(r, h[2:10]); err != nil {
			return nil, 0, f, err
		}
		n, hl = binary.BigEndian.Uint64(h[2:10]), 10
	}
	if masked {
		if _, err := io.ReadFull(r, h[hl:hl+4]); err != nil {
			return nil, 0, f, err
		}
		hl += 4
	}
	if n > 4<<20 {
		return nil, 0, f, fmt.Errorf("a %d-byte frame", n)
	}
	raw := make([]byte, hl+int(n))
	copy(raw, h[:hl])
	if _, err := io.ReadFull(r, raw[hl:]); err != nil {
		return nil, 0, f, err
	}
	f.Bytes = int(n)
	if f.Opcode == 1 && h[0]&0x80 != 0 {
		payload := raw[hl:]
		if masked {
			payload = append([]byte(nil), payload...)
			key := h[hl-4 : hl]
			for i := range payload {
				payload[i] ^= key[i%4]
			}
		}
		var j struct {
			T             string          `json:"t"`
			InstructionID string          `json:"instructionId"`
			Part          string          `json:"part"`
			Kind          string          `json:"kind"`
			StreamSeq     *int64          `json:"streamSeq"`
			UpTo          *int64          `json:"upToStreamSeq"`
			Reason        string          `json:"reason"`
			Code          string          `json:"code"`
			Gen           string          `json:"gen"`
			Pending       []string        `json:"pendingInstructions"`
			DataB64       *string         `json:"dataB64"`
			ExitCode      *int            `json:"exitCode"`
			DeviceSeq     *int64          `json:"deviceSeq"`
			Outcome       json.RawMessage `json:"outcome"`
		}
		if json.Unmarshal(payload, &j) == nil {
			f.T, f.ID, f.Part, f.Kind, f.Reason, f.Code, f.Gen, f.Pending = j.T, j.InstructionID, j.Part, j.Kind, j.Reason, j.Code, j.Gen, j.Pending
			if j.StreamSeq != nil {
				f.Seq = *j.StreamSeq
			}
			switch j.T {
			case "chunk":
				f.Body = fmt.Sprintf("%s %v %v", j.Kind, deref(j.DataB64), deref(j.ExitCode))
			case "result":
				f.Body = fmt.Sprintf("%v %s", deref(j.DeviceSeq), j.Outcome)
			}
			if j.UpTo != nil {
				f.Seq = *j.UpTo
			}
		}
	}
	return raw, hl, f, nil
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func clipped(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func (p *proxy) resends() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resent
}

// retransmissions lists re-sent chunks and results that were not exact
// copies of the first send.
func (p *proxy) retransmissions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.retransmit...)
}

// Fault builders.

// once answers act for the first frame matching pred, and forward for every
// other frame.
func once(pred func(*frame) bool, act action) fault {
	var fired atomic.Bool
	return func(f *frame) action {
		if pred(f) && fired.CompareAndSwap(false, true) {
			return act
		}
		return forward
	}
}

// nth answers act for the n-th frame (from 1) matching pred.
func nth(n int, pred func(*frame) bool, act action) fault {
	var seen atomic.Int64
	return func(f *frame) action {
		if pred(f) && seen.Add(1) == int64(n) {
			return act
		}
		return forward
	}
}

// is matches frames by direction and type.
func is(d dir, t string) func(*frame) bool {
	return func(f *frame) bool { return f.Dir == d && f.T == t }
}

// on matches frames by direction, type and instruction id.
func on(d dir, t, id string) func(*frame) bool {
	return func(f *frame) bool { return f.Dir == d && f.T == t && f.ID == id }
}

func both(a, b func(*frame) bool) func(*frame) bool {
	return func(f *frame) bool { return a(f) && b(f) }
}

func describe(fs []frame) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
