package executor_test

import (
	"testing"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/fakelane"
	"github.com/sema-agent/sema/protocol"
)

// A fast producer (20 MB of output as fast as the pipe goes) against a lane
// that acks only when the device has stopped sending: the device never has
// more than its bound unacked on the wire (well under the lane's reorder
// buffer of 64 entries / 2 MiB), the outbox never holds more than that in
// memory, and every byte arrives, in order, once.
func TestBackPressureHoldsMemoryFlat(t *testing.T) {
	const total = 20 << 20
	const maxChunks, maxBytes = 32, 1 << 20
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	id := newID()
	c.Send(execIn(1, id, "head -c 20971520 /dev/zero", 0))
	acked := int64(-1)
	for {
		var s fakelane.Stream
		// Wait until the device may be blocked: one more chunk of the
		// largest size would cross a bound, or the result is in.
		err := h.lane.Ledger.WaitFor(h.ctx(), "the device to fill its window", func(l *fakelane.Ledger) bool {
			s = l.Stream(id)
			n, b := 0, 0
			for seq := acked + 1; seq <= s.Contiguous; seq++ {
				n++
				b += len(s.Chunks[seq].Data)
			}
			return len(s.Results) > 0 || n >= maxChunks || b > maxBytes-ops.MaxChunkBytes
		})
		if err != nil {
			t.Fatal(err)
		}
		if now, _ := h.rt.Held(); now > maxBytes {
			t.Fatalf("the outbox holds %d bytes, over the %d bound", now, maxBytes)
		}
		if len(s.Results) > 0 {
			break
		}
		acked = s.Contiguous
		c.Send(&protocol.ChunkAck{Gen: 1, InstructionID: id, UpToStreamSeq: acked})
	}
	s := h.lane.Ledger.Stream(id)
	if s.MaxOutstanding > maxChunks || s.MaxOutstandingBytes > maxBytes {
		t.Errorf("the device had %d chunks / %d bytes unacked on the wire; bound %d / %d", s.MaxOutstanding, s.MaxOutstandingBytes, maxChunks, maxBytes)
	}
	if _, peak := h.rt.Held(); peak > maxBytes {
		t.Errorf("the outbox peaked at %d bytes, over the %d bound", peak, maxBytes)
	}
	r := s.Results[0]
	if outcomeOf(t, r) != "exec:0" {
		t.Fatalf("outcome %s", outcomeOf(t, r))
	}
	if got := len(h.lane.Ledger.Output(id, protocol.ChunkStdout)); got != total {
		t.Errorf("%d bytes arrived, want %d", got, total)
	}
	for seq, n := range s.Copies {
		if n != 1 {
			t.Errorf("chunk %d arrived %d times", seq, n)
		}
	}
	t.Logf("%d chunks; most unacked on the wire: %d chunks / %d bytes", len(s.Chunks), s.MaxOutstanding, s.MaxOutstandingBytes)
}
