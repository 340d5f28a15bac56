package lane

import (
	"math/rand/v2"
	"testing"
)

// modelDevice is our executor's outbox for one instruction, as far as flow
// control goes: it admits a chunk while what it holds unacknowledged stays
// within its allowance (executor.Config MaxUnackedBytes/MaxUnackedChunks;
// an empty stream may always take one chunk), and releases on an ack.
type modelDevice struct {
	maxBytes, maxChunks int
	next                int64 // the next streamSeq
	acked               int64 // the newest acknowledgement it has seen
	held                []int // sizes of chunks above acked, in order
	heldBytes           int
}

func (d *modelDevice) produce(n int) (seq int64, ok bool) {
	if len(d.held) > 0 && (len(d.held) >= d.maxChunks || d.heldBytes+n > d.maxBytes) {
		return 0, false // the command blocks: its pipe fills
	}
	d.held = append(d.held, n)
	d.heldBytes += n
	seq = d.next
	d.next++
	return seq, true
}

func (d *modelDevice) ack(upTo int64) {
	for d.acked < upTo && len(d.held) > 0 {
		d.heldBytes -= d.held[0]
		d.held = d.held[1:]
		d.acked++
	}
}

type sentChunk struct {
	seq int64
	n   int
}

// §4 flow control, the argument of backlog.go checked by brute force: a
// device that keeps to our executor's allowance never overflows the
// pending-delivery bound, however the socket delays chunks and
// acknowledgements and however the reader stalls — including a reader whose
// release decision is separated from the acknowledgement it sends by chunks
// pushed in between (the race that acknowledged the stream's watermark and
// cancelled large outputs nobody had interrupted).
func TestTheWindowNeverOverflowsWithOurExecutor(t *testing.T) {
	const bound = 2 << 20
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := newBacklog(8192, bound)
		dev := &modelDevice{maxBytes: bound / 2, maxChunks: 32, acked: -1}
		var (
			toLane  []sentChunk // chunks on the wire, in order
			toDev   []int64     // acks on the wire, in order
			unread  []int       // sizes in the reader's queue
			pending []int64     // releases decided by a reader, not yet sent
			stall   int         // steps the reader sleeps
		)
		for step := 0; step < 200_000; step++ {
			switch rng.IntN(6) {
			case 0, 1: // the command writes
				size := 1 + rng.IntN(64<<10)
				if seq, ok := dev.produce(size); ok {
					toLane = append(toLane, sentChunk{seq, size})
				}
			case 2: // the lane reads a frame
				if len(toLane) == 0 {
					continue
				}
				c := toLane[0]
				toLane = toLane[1:]
				if !b.push(c.seq, c.n) {
					t.Fatalf("seed %d step %d: the bound refused streamSeq %d with %d bytes / %d chunks unread",
						seed, step, c.seq, b.bytes, b.entries)
				}
				unread = append(unread, c.n)
				if upTo, ok := b.afterPush(); ok {
					toDev = append(toDev, upTo)
				}
			case 3: // the device reads an ack
				if len(toDev) > 0 {
					dev.ack(toDev[0])
					toDev = toDev[1:]
				}
			case 4: // the reader takes a chunk, or stalls for a while
				if stall > 0 {
					stall--
					continue
				}
				if rng.IntN(500) == 0 {
					stall = rng.IntN(5000)
					continue
				}
				if len(unread) == 0 {
					continue
				}
				n := unread[0]
				unread = unread[1:]
				if upTo, ok := b.take(n); ok {
					pending = append(pending, upTo) // sent later: chunks may be pushed meanwhile
				}
			case 5: // a reader's release reaches the socket
				if len(pending) > 0 {
					toDev = append(toDev, pending[0])
					pending = pending[1:]
				}
			}
		}
		if dev.next < 1000 {
			t.Fatalf("seed %d: only %d chunks flowed; the model is stuck", seed, dev.next)
		}
	}
}

// The window is half the bound, by bytes and by entries, and a withheld
// acknowledgement is released by the take that brings the backlog back
// inside it, naming what had been pushed then.
func TestTheWindowIsHalfTheBound(t *testing.T) {
	b := newBacklog(8, 100)
	for seq := range int64(2) {
		b.push(seq, 25)
		if upTo, ok := b.afterPush(); !ok || upTo != seq {
			t.Fatalf("streamSeq %d with 50 of 100 bytes unread: ack %d %v, want %d", seq, upTo, ok, seq)
		}
	}
	b.push(2, 1) // 51 > 50
	if _, ok := b.afterPush(); ok {
		t.Fatal("acknowledged with 51 of 100 bytes unread")
	}
	if !b.push(3, 49) || b.push(4, 1) {
		t.Fatal("the bound is 100 bytes: 100 fit, 101 do not")
	}
	if _, ok := b.take(25); ok {
		t.Fatal("released with 75 of 100 bytes unread")
	}
	upTo, ok := b.take(25)
	if !ok || upTo != 3 {
		t.Fatalf("take to 50 bytes: release %d %v, want 3", upTo, ok)
	}
	if _, ok := b.take(1); ok {
		t.Fatal("released twice")
	}

	e := newBacklog(4, 1<<20)
	e.push(0, 0)
	e.push(1, 0)
	if _, ok := e.afterPush(); !ok {
		t.Fatal("2 of 4 entries unread is inside the window")
	}
	e.push(2, 0)
	if _, ok := e.afterPush(); ok {
		t.Fatal("3 of 4 entries unread is outside the window")
	}
}
