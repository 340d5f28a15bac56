package nexting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
)

// The published GATT design (profiles sheet "Transport (BLE GATT)"). The
// device is the peripheral, the host the central.
const (
	// BLEServiceUUID is the primary service.
	BLEServiceUUID = "6eadc0de-0001-4a21-9c5e-1b7f3d9e42a0"
	// BLEDownlinkUUID: host → device frames, write with response.
	BLEDownlinkUUID = "6eadc0de-0002-4a21-9c5e-1b7f3d9e42a0"
	// BLEUplinkUUID: device → host frames, notify.
	BLEUplinkUUID = "6eadc0de-0003-4a21-9c5e-1b7f3d9e42a0"
	// BLEDeviceInfoUUID: the Device Info value, read (not framed).
	BLEDeviceInfoUUID = "6eadc0de-0004-4a21-9c5e-1b7f3d9e42a0"
)

const (
	// MinATTMTU is the smallest ATT MTU of a BLE link (chunks of 20 bytes).
	MinATTMTU = 23
	// maxAttrValue is the longest attribute value, so the largest chunk
	// whatever the MTU.
	maxAttrValue = 512
)

// BLEChunkSize is the payload of one downlink write or uplink notification
// at ATT MTU mtu: mtu − 3 (the ATT opcode and handle), at most 512 (the
// longest attribute value). MTUs 23, 185, 247 and 512 give 20, 182, 244
// and 509. An MTU below 23 is refused.
func BLEChunkSize(mtu int) (int, error) {
	if mtu < MinATTMTU {
		return 0, fmt.Errorf("nexting: ATT MTU %d below %d", mtu, MinATTMTU)
	}
	return min(mtu-3, maxAttrValue), nil
}

// BLESplit cuts one frame into chunks of at most size bytes, in order (the
// chunks share frame's memory). Every frame starts a new chunk: fragments
// of two frames never share a write or a notification.
func BLESplit(frame []byte, size int) [][]byte {
	if size < 1 {
		panic("nexting: BLESplit with chunk size < 1")
	}
	out := make([][]byte, 0, (len(frame)+size-1)/size)
	for len(frame) > size {
		out = append(out, frame[:size:size])
		frame = frame[size:]
	}
	if len(frame) > 0 {
		out = append(out, frame)
	}
	return out
}

// BLEReassembler is the receiving side of one BLE direction: downlink
// writes on a device, uplink notifications on a host. It feeds each chunk
// to a Framer, so chunks may split frames anywhere and carry several, and
// adds what the link knows:
//
//   - Lost: a chunk was dropped locally (a notification queue overflowed).
//     The current frame is cleared and input is discarded through the next
//     LF, so the rest of a damaged frame is never taken for a new one.
//   - Disconnect: framing is cleared; the next chunk starts a fresh frame.
//
// The published design has no sequence numbers or checksums: ATT over
// L2CAP is reliable and ordered, so loss or duplication can only come
// from a faulty stack. A loss the link does not report, or a duplicate,
// damages the frames it touches — almost always into a frame the strict
// decoder refuses — and framing resynchronizes at the next LF.
type BLEReassembler struct {
	framer *Framer
	resync bool // discarding through the next LF after a loss
}

// NewBLEReassembler returns a reassembler around f (use the negotiated
// Framer on a host, the device's own on a device).
func NewBLEReassembler(f *Framer) *BLEReassembler { return &BLEReassembler{framer: f} }

// Chunk feeds one received chunk and returns the Results it completed.
func (r *BLEReassembler) Chunk(p []byte) []Result {
	if r.resync {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return nil
		}
		r.resync = false
		p = p[i+1:]
	}
	return r.framer.Feed(p)
}

// Lost reports that a chunk was dropped before reaching Chunk. It returns
// a bad_message Result (Size 0, so Reply never answers it) the first time
// in a run of losses.
func (r *BLEReassembler) Lost() []Result {
	r.framer.Reset()
	first := !r.resync
	r.resync = true
	if !first {
		return nil
	}
	return []Result{{Err: &Error{Code: CodeBadMessage, Detail: "BLE chunk lost; frame discarded"}}}
}

// Disconnect clears framing: a partial frame is dropped.
func (r *BLEReassembler) Disconnect() {
	r.framer.Reset()
	r.resync = false
}

// BLELink is one connected GATT client link from the host (central) to a
// nexting peripheral, as a BLE stack adapter provides it once it has
// connected, discovered BLEServiceUUID and its three characteristics, and
// (before any approval traffic — the spec requires an encrypted, bonded
// link) paired. nexting/bleadapter implements it on tinygo.org/x/bluetooth
// and BlueZ; this package does not depend on it, so that a device maker
// using the codec pulls in no Bluetooth stack.
type BLELink interface {
	// MTU is the link's current ATT MTU (≥ 23).
	MTU() int
	// ReadDeviceInfo reads the whole Device Info characteristic value (a
	// long read when it exceeds one PDU). It must return promptly after
	// Disconnect.
	ReadDeviceInfo() ([]byte, error)
	// WriteDownlink writes one chunk to the downlink characteristic with
	// response: it returns once the peripheral acknowledged it, or with an
	// error (then whether the chunk arrived is unknown; it is never
	// retried). It must return promptly after Disconnect.
	WriteDownlink(chunk []byte) error
	// SubscribeUplink enables uplink notifications; notify is called once
	// per notification, in order, possibly on the stack's goroutine. It
	// must not be called after Disconnected is closed.
	SubscribeUplink(notify func(chunk []byte)) error
	// Disconnect ends the link. Idempotent.
	Disconnect() error
	// Disconnected is closed once the link is down, whoever ended it.
	Disconnected() <-chan struct{}
}

// ErrLinkLost is a BLEConn's Err when the BLE link went down.
var ErrLinkLost = errors.New("nexting: BLE link lost")

// BLEConn is a host Conn over a BLELink: frames are cut to the link's
// chunk size and written one chunk at a time with response; uplink
// notifications are queued by the callback (never blocking the BLE stack),
// then reassembled. It owns two goroutines:
//
//   - the reader takes notifications off the queue, reassembles them and
//     delivers Results. A queue overflow drops the chunk and is reported
//     to the reassembler as Lost, so framing resynchronizes instead of
//     splicing two frames together.
//   - the writer writes each queued frame's chunks in order. A failed write
//     is never retried (the chunk may have arrived): the link is
//     disconnected, which clears framing on both ends.
//
// A disconnect (from either side) ends both after the notifications that
// arrived before it are delivered; a partial frame is dropped.
type BLEConn struct {
	link    BLELink
	re      *BLEReassembler
	results chan Result

	mu       sync.Mutex
	in       []bleNote // notifications not yet reassembled
	inBytes  int
	maxIn    int
	overflow bool          // the queue overflowed; dropping until the reader empties it
	inWake   chan struct{} // cap 1
	err      error         // guarded by mu
	out      *sendQueue    // frames not yet written

	stop      chan struct{}
	stopOnce  sync.Once
	readDone  chan struct{}
	writeDone chan struct{}
}

type bleNote struct {
	chunk []byte
	lost  bool // a chunk was dropped here
}

// NewBLEConn subscribes to the link's uplink and starts the connection.
// framer is the negotiated one (Negotiated.NewFramer).
func NewBLEConn(link BLELink, framer *Framer) (*BLEConn, error) {
	c := newBLEConn(link, framer)
	if err := link.SubscribeUplink(c.notify); err != nil {
		_ = link.Disconnect()
		return nil, err
	}
	c.start()
	return c, nil
}

// newBLEConn builds a BLEConn without subscribing or starting it.
func newBLEConn(link BLELink, framer *Framer) *BLEConn {
	return &BLEConn{
		link:      link,
		re:        NewBLEReassembler(framer),
		results:   make(chan Result),
		maxIn:     16 << 10,
		inWake:    make(chan struct{}, 1),
		out:       newSendQueue(64 << 10),
		stop:      make(chan struct{}),
		readDone:  make(chan struct{}),
		writeDone: make(chan struct{}),
	}
}

func (c *BLEConn) start() {
	go c.readLoop()
	go c.writeLoop()
}

// OpenBLE starts a host session over a connected, bonded BLE link: it
// reads Device Info from its characteristic, negotiates, subscribes to the
// uplink and starts the session. On error, and when ctx ends first, the
// link is disconnected.
func OpenBLE(ctx context.Context, link BLELink, cfg SessionConfig) (*Session, error) {
	stop := context.AfterFunc(ctx, func() { _ = link.Disconnect() })
	raw, err := link.ReadDeviceInfo()
	if !stop() {
		return nil, fmt.Errorf("nexting: reading Device Info: %w", context.Cause(ctx))
	}
	if err == nil {
		var s *Session
		s, err = newSessionFromInfo(raw, cfg, func(neg *Negotiated) (Conn, error) {
			return NewBLEConn(link, neg.NewFramer())
		})
		if err == nil {
			return s, nil
		}
	}
	_ = link.Disconnect()
	return nil, err
}

// notify is the uplink callback: it copies and queues, never blocks.
func (c *BLEConn) notify(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stop:
		return
	default:
	}
	if c.overflow || c.inBytes+len(p) > c.maxIn {
		// Drop everything until the reader empties the queue: one loss.
		if !c.overflow {
			c.in = append(c.in, bleNote{lost: true})
			c.overflow = true
		}
	} else {
		c.in = append(c.in, bleNote{chunk: bytes.Clone(p)})
		c.inBytes += len(p)
	}
	select {
	case c.inWake <- struct{}{}:
	default:
	}
}

// Results implements Conn.
func (c *BLEConn) Results() <-chan Result { return c.results }

// Send implements Conn.
func (c *BLEConn) Send(frame []byte) error {
	if err := checkFrameShape(frame); err != nil {
		return err
	}
	return c.out.push(frame, c.stop)
}

// Close implements Conn: it disconnects the link and waits.
func (c *BLEConn) Close() error {
	c.fail(ErrClosed)
	<-c.readDone
	<-c.writeDone
	return nil
}

// Err implements Conn.
func (c *BLEConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *BLEConn) fail(err error) {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		c.out.clear()
		close(c.stop)
		_ = c.link.Disconnect()
	})
}

func (c *BLEConn) readLoop() {
	defer close(c.readDone)
	defer close(c.results)
	for {
		var linkDown bool
		select {
		case <-c.inWake:
		case <-c.link.Disconnected():
			linkDown = true
		case <-c.stop:
			return
		}
		c.mu.Lock()
		notes := c.in
		c.in, c.inBytes, c.overflow = nil, 0, false
		c.mu.Unlock()
		for _, n := range notes {
			var rs []Result
			if n.lost {
				rs = c.re.Lost()
			} else {
				rs = c.re.Chunk(n.chunk)
			}
			for _, r := range rs {
				select {
				case c.results <- r:
				case <-c.stop:
					return
				}
			}
		}
		if linkDown {
			c.re.Disconnect()
			c.fail(ErrLinkLost)
			return
		}
	}
}

func (c *BLEConn) writeLoop() {
	defer close(c.writeDone)
	c.out.run(c.stop, func(f []byte) error {
		size, err := BLEChunkSize(c.link.MTU())
		if err != nil {
			return err
		}
		for _, chunk := range BLESplit(f, size) {
			if err := c.link.WriteDownlink(chunk); err != nil {
				return fmt.Errorf("nexting: BLE downlink write: %w", err)
			}
		}
		return nil
	}, c.fail)
}
