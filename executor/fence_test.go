package executor_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// The fence (§1.5, R2, R10): after a reconnect, the listed instruction keeps
// running and the unlisted one is killed — its whole process group — before
// generationAck; nothing is ever sent for the unlisted one again.
func TestFenceKeepsListedAndKillsUnlisted(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	g := newGate(t)
	listed, unlisted := newID(), newID()
	c.Send(execIn(1, listed, "echo $$; "+g.wait()+"; echo done", 0))
	// The unlisted one also leaves a background child in its group.
	c.Send(execIn(1, unlisted, "sleep 1000 & echo $$ $!; exec sleep 1000", 0))
	keepPID := h.pidOf(listed)
	if err := h.lane.Ledger.WaitOutput(h.ctx(), unlisted, "\n"); err != nil {
		t.Fatal(err)
	}
	var shellPID, childPID int
	fmt.Sscan(h.lane.Ledger.Output(unlisted, protocol.ChunkStdout), &shellPID, &childPID)
	if !alive(shellPID) || !alive(childPID) || !alive(keepPID) {
		t.Fatal("the commands are not running")
	}

	c.Close()
	h.advanceBackoff()
	c2, err := h.lane.Next(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	wm := map[string]int64{listed: h.lane.Ledger.Stream(listed).Contiguous}
	if err := c2.Ack(2, hbMs, []string{listed}, wm); err != nil {
		t.Fatal(err)
	}
	f, err := c2.NextFrame(h.ctx(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ga, ok := f.(*protocol.GenerationAck); !ok || ga.Gen != 2 {
		t.Fatalf("first frame %#v", f)
	}
	// By the time generationAck arrives the unlisted group is gone.
	if alive(shellPID) || alive(childPID) {
		t.Fatalf("unlisted work still alive at generationAck: shell %v, background child %v", alive(shellPID), alive(childPID))
	}
	if !alive(keepPID) {
		t.Fatal("listed work was killed by the fence")
	}
	c2.AutoAck(true)
	g.open(t)
	r, err := h.lane.Ledger.WaitResult(h.ctx(), listed)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "exec:0" || r.Conn != c2.N || r.Gen != 2 {
		t.Errorf("listed result %+v", r)
	}
	if out := h.lane.Ledger.Output(listed, protocol.ChunkStdout); !strings.HasSuffix(out, "done\n") {
		t.Errorf("listed output %q", out)
	}
	// The unlisted instruction has no result, anywhere; the ledger also
	// fails the test if any frame for it reached the second socket.
	if rs := h.lane.Ledger.Stream(unlisted).Results; len(rs) != 0 {
		t.Errorf("unlisted results %+v", rs)
	}
	// The heartbeat's inflight is the truth: nothing runs now.
	h.clock.Advance(hbMs * 1e6)
	hb, err := c2.WaitFrame(h.ctx(), func(f protocol.DeviceFrame) bool { _, ok := f.(*protocol.Heartbeat); return ok })
	if err != nil {
		t.Fatal(err)
	}
	if in := hb.(*protocol.Heartbeat).Inflight; len(in) != 0 {
		t.Errorf("heartbeat inflight %v after everything ended", in)
	}
}

// Resume with watermarks (R2, R7): chunks above the lane's watermark are
// re-sent with the same bytes and the same numbers under the new gen; the
// stream ends contiguous, without a duplicate or a missing streamSeq.
func TestResumeFromWatermarks(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	g := newGate(t)
	id := newID()
	c.Send(execIn(1, id, "for i in 1 2 3; do echo line$i; sleep 0.01; done; "+g.wait()+"; for i in 4 5 6; do echo line$i; done", 0))
	if err := h.lane.Ledger.WaitOutput(h.ctx(), id, "line3\n"); err != nil {
		t.Fatal(err)
	}
	first := h.lane.Ledger.Stream(id)
	if first.Contiguous < 1 {
		t.Skipf("the three lines came as one chunk (%d); nothing to resume between", first.Contiguous+1)
	}
	// The lane accepted only chunk 0 (its ack was "lost" for the rest).
	// (The fake lane keeps every copy, so it does not ack on this socket:
	// its contiguous watermark already covers what it told the device it
	// lacks.)
	h.reconnect(c, 2, []string{id}, map[string]int64{id: 0})
	g.open(t)
	r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if outcomeOf(t, r) != "exec:0" || r.Gen != 2 {
		t.Fatalf("result %+v", r)
	}
	s := h.lane.Ledger.Stream(id)
	if out := h.lane.Ledger.Output(id, protocol.ChunkStdout); out != "line1\nline2\nline3\nline4\nline5\nline6\n" {
		t.Fatalf("output %q", out)
	}
	last := s.Chunks[s.Contiguous]
	if last.Kind != protocol.ChunkExit || int64(len(s.Chunks)) != s.Contiguous+1 {
		t.Fatalf("stream does not end with its one exit chunk: %d chunks, contiguous %d", len(s.Chunks), s.Contiguous)
	}
	if s.Copies[0] != 1 {
		t.Errorf("chunk 0, at the watermark, was re-sent (%d copies)", s.Copies[0])
	}
	for seq := int64(1); seq <= first.Contiguous; seq++ {
		if s.Copies[seq] != 2 {
			t.Errorf("chunk %d above the watermark arrived %d times, want 2 (sent, then re-sent); first %+v copies %v", seq, s.Copies[seq], first.Copies, s.Copies)
		}
	}
	var seqs []int64
	for seq := range s.Chunks {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for i, seq := range seqs {
		if seq != int64(i) {
			t.Fatalf("streamSeqs %v are not contiguous from 0", seqs)
		}
	}
}

// A result whose ack was lost is re-sent on the next socket with the SAME
// deviceSeq (R5, R6), and never after its ack.
func TestResultRetransmittedWithTheSameDeviceSeq(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	id := newID()
	c.Send(execIn(1, id, "echo hi", 0))
	r1, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	s := h.lane.Ledger.Stream(id)
	c2 := h.reconnect(c, 2, []string{id}, map[string]int64{id: s.Contiguous})
	if err := h.lane.Ledger.WaitFor(h.ctx(), "a second copy", func(l *fakelaneLedger) bool { return len(l.Stream(id).Results) == 2 }); err != nil {
		t.Fatal(err)
	}
	rs := h.lane.Ledger.Stream(id).Results
	if rs[1].DeviceSeq != r1.DeviceSeq || rs[1].Gen != 2 || rs[1].Conn != c2.N || outcomeOf(t, rs[1]) != outcomeOf(t, r1) {
		t.Fatalf("retransmission %+v, first %+v", rs[1], r1)
	}
	if s2 := h.lane.Ledger.Stream(id); len(s2.Copies) != len(s.Copies) {
		t.Errorf("chunks at the watermark were re-sent")
	}
	// Acked now: released, and a later socket that does not list it hears
	// nothing about it (the ledger fails the test otherwise).
	c2.Send(&protocol.ResultAck{Gen: 2, InstructionID: id})
	h.waitOutboxEmpty()
	c3 := h.reconnect(c2, 3, nil, nil)
	_ = c3
	if n := len(h.lane.Ledger.Stream(id).Results); n != 2 {
		t.Errorf("%d result copies, want 2", n)
	}
}

// A result the lane keeps not acking is given up after MaxResultSends
// sockets, never re-executed.
func TestUnackedResultIsGivenUp(t *testing.T) {
	h := newHarness(t, withMaxResultSends(2))
	c := h.connect(1, nil, nil)
	id := newID()
	marker := t.TempDir() + "/ran"
	c.Send(execIn(1, id, "echo x >> "+marker, 0))
	if _, err := h.lane.Ledger.WaitResult(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	wm := func() map[string]int64 { return map[string]int64{id: h.lane.Ledger.Stream(id).Contiguous} }
	c = h.reconnect(c, 2, []string{id}, wm())
	if err := h.lane.Ledger.WaitFor(h.ctx(), "the second send", func(l *fakelaneLedger) bool { return len(l.Stream(id).Results) == 2 }); err != nil {
		t.Fatal(err)
	}
	c = h.reconnect(c, 3, []string{id}, wm())
	h.waitOutboxEmpty()
	if n := len(h.lane.Ledger.Stream(id).Results); n != 2 {
		t.Errorf("%d sends, want 2 (MaxResultSends)", n)
	}
	if b := readFile(t, marker); b != "x\n" {
		t.Errorf("the command ran %d times", strings.Count(b, "x"))
	}
}

// §1.5, R2: an instruction fenced under one generation (a connection to
// another replica did not list it) that a later helloAck lists again is
// answered at once outcome_unknown under the new generation: the executor
// stopped and forgot it, and the lane would otherwise wait out timeoutMs
// for a result that never comes.
func TestAListedInstructionAlreadyFencedIsAnsweredAtOnce(t *testing.T) {
	h := newHarness(t)
	c := h.connect(1, nil, nil)
	c.AutoAck(true)
	id := newID()
	c.Send(execIn(1, id, "echo started; exec sleep 1000", 0))
	if err := h.lane.Ledger.WaitOutput(h.ctx(), id, "started\n"); err != nil {
		t.Fatal(err)
	}
	c2 := h.reconnect(c, 2, nil, nil) // fenced: stopped and forgotten
	c3 := h.reconnect(c2, 3, []string{id}, map[string]int64{id: h.lane.Ledger.Stream(id).Contiguous})
	c3.AutoAck(true)
	r, err := h.lane.Ledger.WaitResult(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomeOf(t, r); r.Gen != 3 || got != "error:"+string(protocol.ErrOutcomeUnknown) {
		t.Fatalf("result %q under gen %s, want outcome_unknown under gen 3", got, r.Gen)
	}
}
