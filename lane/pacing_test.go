package lane

import (
	"context"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// Reading paces the device: output is acknowledged while at most half the
// pending-delivery bound waits unread; beyond that acknowledgements wait
// for the caller, and Next releases them once the backlog is back inside.
func TestAcknowledgementsWaitForTheReader(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.DeliveryEntries = 4 })
	fd := l.enroll()
	fd.establish()
	call := runKind(t, l, fd, execInstr("yes"))
	for seq := range int64(4) {
		fd.chunk(call.ID, seq, protocol.ChunkStdout, "y\n")
	}
	fd.expectChunkAck(call.ID, 0)
	fd.expectChunkAck(call.ID, 1)
	frames := fd.barrier()
	none[*protocol.ChunkAck](t, frames, "chunkAck beyond the window while nobody reads", nil)
	if call.Err() != nil {
		t.Fatalf("Err() = %v: a paced stream must not overflow", call.Err())
	}

	// A duplicate is re-acknowledged with the watermark already sent, never
	// a withheld one.
	fd.chunk(call.ID, 3, protocol.ChunkStdout, "y\n")
	fd.expectChunkAck(call.ID, 1)

	next(t, call) // 3 unread: still over the window
	frames = fd.barrier()
	none[*protocol.ChunkAck](t, frames, "chunkAck with 3 of 4 entries unread", nil)
	next(t, call) // 2 unread: inside
	fd.expectChunkAck(call.ID, 3)

	// Inside the window acknowledgements are immediate again.
	next(t, call)
	next(t, call)
	fd.chunk(call.ID, 4, protocol.ChunkStdout, "y\n")
	fd.expectChunkAck(call.ID, 4)
}

// The window counts bytes as well as entries.
func TestAcknowledgementsWaitForTheReaderByBytes(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.DeliveryBytes = 8 })
	fd := l.enroll()
	fd.establish()
	call := runKind(t, l, fd, execInstr("yes"))
	fd.chunk(call.ID, 0, protocol.ChunkStdout, "abcd") // 4 ≤ 8/2
	fd.expectChunkAck(call.ID, 0)
	fd.chunk(call.ID, 1, protocol.ChunkStdout, "e") // 5 > 4
	frames := fd.barrier()
	none[*protocol.ChunkAck](t, frames, "chunkAck with 5 of 8 bytes unread", nil)
	next(t, call)
	fd.expectChunkAck(call.ID, 1)
}

func next(t *testing.T, c *Call) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	e, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// R2 with a withheld acknowledgement: helloAck.chunkWatermarks reports the
// acknowledged watermark, not the delivered one, so a reconnect cannot hand
// the device a fresh allowance on top of a backlog nobody has read
// (backlog.go). The chunks re-sent from there are absorbed as duplicates,
// delivered once, and acknowledged as the reader catches up.
func TestReconnectReportsTheAcknowledgedWatermark(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.DeliveryEntries = 4 })
	fd := l.enroll()
	fd.establish()
	call := runKind(t, l, fd, execInstr("yes"))
	for seq := range int64(3) {
		fd.chunk(call.ID, seq, protocol.ChunkStdout, "y\n")
	}
	fd.expectChunkAck(call.ID, 0)
	fd.expectChunkAck(call.ID, 1)
	fd.barrier() // streamSeq 2 delivered, its acknowledgement withheld

	fd.drop()
	ack := fd.connect()
	if got := ack.ChunkWatermarks[call.ID]; got != 1 {
		t.Fatalf("chunkWatermarks[%s] = %d after a withheld ack, want the acknowledged 1", call.ID, got)
	}
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	fd.chunk(call.ID, 2, protocol.ChunkStdout, "y\n") // the device re-sends from the watermark
	fd.expectChunkAck(call.ID, 1)
	for range 3 {
		next(t, call)
	}
	fd.expectChunkAck(call.ID, 2)
	if call.Err() != nil {
		t.Fatalf("Err() = %v", call.Err())
	}
}
