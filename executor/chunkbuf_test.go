package executor

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/protocol"
)

// A chunk the writer has pulled keeps its bytes until the writer is done
// with it, even when the lane acks it meanwhile and new output reuses the
// released buffers; and a chunk is sent byte-identical every time.
func TestAPulledChunkKeepsItsBytesWhileItIsEncoded(t *testing.T) {
	o := newOutbox(outboxLimits{maxChunks: 32, maxBytes: 1 << 20, maxTotalBytes: 8 << 20, maxResultSends: 5, resultGiveUp: time.Hour},
		clock.NewFake(time.Unix(0, 0)))
	ctx := context.Background()
	o.open("ins_a")
	o.open("ins_b")
	first := bytes.Repeat([]byte("A"), 65536)
	if err := o.putChunk(ctx, "ins_a", protocol.ChunkStdout, first, 0); err != nil {
		t.Fatal(err)
	}
	fr, _, ok := o.pull(7)
	if !ok || fr.chunk == nil || !bytes.Equal(fr.chunk.Data, first) {
		t.Fatal("pulled no chunk, or not the one put")
	}
	o.chunkAck("ins_a", 0) // the outbox lets go of it; the writer has not
	for i := range 64 {
		o.chunkAck("ins_b", int64(i)-1)
		if err := o.putChunk(ctx, "ins_b", protocol.ChunkStdout, bytes.Repeat([]byte("B"), 65536), 0); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(fr.chunk.Data, first) {
		t.Fatalf("a chunk being encoded was overwritten by later output (%d bytes differ)", countDiff(fr.chunk.Data, first))
	}
	fr.done()

	// Retransmission after a resume sends the same bytes again.
	o.drop("ins_b")
	o.putChunk(ctx, "ins_a", protocol.ChunkStderr, []byte("again"), 0)
	once, _, _ := o.pull(7)
	once.done()
	o.resume(map[string]int64{"ins_a": 0})
	again, _, ok := o.pull(8)
	if !ok || again.chunk == nil || string(again.chunk.Data) != "again" || again.chunk.StreamSeq != 1 {
		t.Fatalf("after the resume: %+v", again.chunk)
	}
	again.done()
}

func countDiff(a, b []byte) (n int) {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}
