package lane

// backlog is the output of one Call that waits for its reader, and the
// acknowledgement window over it (§4 flow control). It is pure: the Call
// keeps it under its mu, and the lane sends the chunkAcks it decides.
//
// The window, and why our executor can never overflow the delivery bound:
//
// Let B be the bound (DeliveryBytes; DeliveryEntries alike) and U the most
// a device holds unacknowledged — our executor blocks a command before its
// unacknowledged output of one instruction would pass MaxUnackedBytes =
// B/2 (and MaxUnackedChunks = 32 entries, far under DeliveryEntries/2).
//
//  1. The lane acknowledges a watermark A only at an instant when every
//     chunk at or below A has been pushed here and what of it is unread
//     weighs at most B/2 (ackable). Nothing at or below A can be pushed
//     later, and reading only shrinks it: at any later instant, the unread
//     chunks at or below the highest watermark A sent weigh at most B/2.
//  2. Every chunk above A was produced by the device while A, or an older
//     watermark, was the newest acknowledgement it had seen: all of them
//     were unacknowledged together at that moment, so they weigh at most U.
//  3. So what waits unread weighs at most B/2 + U ≤ B at every instant, and
//     push never refuses a chunk. Chunk size does not matter: the executor
//     counts whole chunks against U before it admits one.
//
// The watermark acknowledged is therefore the last chunk pushed *when the
// decision is taken*, never the stream's watermark read later: chunks
// pushed between a reader's decision and the ack it sends would be covered
// by an acknowledgement no window admitted, and the device could then run
// U past them (and report a command it never stopped as cancelled). The same
// reasoning makes a reconnect report the acknowledged watermark in
// helloAck.chunkWatermarks (conn.go): chunks delivered but not yet
// acknowledged are not yet "accepted" in §4's sense, and re-sent ones are
// absorbed as duplicates.
//
// A device that ignores acknowledgements still overflows, and the lane
// cancels its command (§4).
type backlog struct {
	maxEntries, maxBytes int   // the pending-delivery bound
	entries, bytes       int   // unread chunks
	pushedTo             int64 // streamSeq of the last chunk pushed; -1 for none
	held                 bool  // an acknowledgement was withheld: take releases it
}

func newBacklog(maxEntries, maxBytes int) backlog {
	return backlog{maxEntries: maxEntries, maxBytes: maxBytes, pushedTo: -1}
}

// push admits a chunk of n bytes; false when it would overflow the bound.
func (b *backlog) push(seq int64, n int) bool {
	if b.entries+1 > b.maxEntries || b.bytes+n > b.maxBytes {
		return false
	}
	b.entries++
	b.bytes += n
	b.pushedTo = seq
	return true
}

// ackable reports whether at most half the bound waits unread, so that the
// device may send its allowance on the strength of an acknowledgement.
func (b *backlog) ackable() bool {
	return b.bytes <= b.maxBytes/2 && b.entries <= b.maxEntries/2
}

// afterPush decides, once chunks were pushed, whether the lane acknowledges
// them now, and up to which streamSeq; if not, take releases it later.
func (b *backlog) afterPush() (upTo int64, ack bool) {
	if b.ackable() {
		return b.pushedTo, true
	}
	b.held = true
	return 0, false
}

// take records that the reader took a chunk of n bytes; when that brings a
// withheld acknowledgement inside the window it returns it (ack true).
func (b *backlog) take(n int) (upTo int64, ack bool) {
	b.entries--
	b.bytes -= n
	if b.held && b.ackable() {
		b.held = false
		return b.pushedTo, true
	}
	return 0, false
}
