package fakelane

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// Ledger is the lane's books across connections: what each instruction's
// stream and result looked like on arrival, checked as the real lane checks
// them. A violation fails the test at once (t.Errorf).
type Ledger struct {
	t testing.TB

	mu      sync.Mutex
	streams map[string]*Stream
	written map[string]bool // ids written off (not listed) at some helloAck
	change  chan struct{}
}

// Stream is one instruction as the lane saw it.
type Stream struct {
	Chunks     map[int64]protocol.Chunk // first copy of each streamSeq
	Contiguous int64                    // highest contiguous streamSeq; -1 = none
	LaneAcked  int64                    // the highest chunkAck the lane sent
	Copies     map[int64]int            // how many times each streamSeq arrived
	Results    []ResultRecord
	// MaxOutstanding / MaxOutstandingBytes: the most chunks (bytes) ever
	// received above LaneAcked: what the device kept in flight.
	MaxOutstanding      int
	MaxOutstandingBytes int
	ResultBeforeChunk   bool // a chunk arrived after a result
}

// ResultRecord is one arrival of a result frame.
type ResultRecord struct {
	Conn      int // Conn.N
	Gen       protocol.Gen
	DeviceSeq int64
	Outcome   protocol.Outcome
}

func newLedger(t testing.TB) *Ledger {
	return &Ledger{t: t, streams: map[string]*Stream{}, written: map[string]bool{}, change: make(chan struct{})}
}

func (l *Ledger) stream(id string) *Stream {
	s := l.streams[id]
	if s == nil {
		s = &Stream{Chunks: map[int64]protocol.Chunk{}, Copies: map[int64]int{}, Contiguous: -1, LaneAcked: -1}
		l.streams[id] = s
	}
	return s
}

func (l *Ledger) changed() {
	close(l.change)
	l.change = make(chan struct{})
}

// newGeneration notes which known ids a helloAck writes off: the device
// must send nothing for them afterwards (§5.4), unless a later helloAck
// lists them again (a lane of several replicas: the one that still holds
// the instruction), which makes them the device's business again.
func (l *Ledger) newGeneration(c *Conn, pending []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.streams {
		if !slices.Contains(pending, id) {
			l.written[id] = true
		}
	}
	for _, id := range pending {
		delete(l.written, id)
	}
}

func (l *Ledger) laneAcked(id string, upTo int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(id)
	s.LaneAcked = max(s.LaneAcked, upTo)
}

// WriteOff marks id as settled by the lane: anything the device sends for
// it afterwards is a violation.
func (l *Ledger) WriteOff(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written[id] = true
}

// record checks and books one frame received on c (generation gen) and
// returns the ack an auto-acking lane sends for it.
func (l *Ledger) record(c *Conn, gen protocol.Gen, f protocol.DeviceFrame) protocol.ServerFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.changed()
	errorf := func(format string, args ...any) {
		l.t.Errorf("fakelane (conn %d): "+format, append([]any{c.N}, args...)...)
	}
	switch f := f.(type) {
	case *protocol.Hello:
		errorf("a second hello on an established connection")
	case *protocol.GenerationAck:
		if f.Gen != gen {
			errorf("generationAck for gen %s on gen %s", f.Gen, gen)
		}
	case *protocol.Heartbeat:
		if f.Gen != gen {
			errorf("heartbeat stamped gen %s on gen %s", f.Gen, gen)
		}
	case *protocol.Goodbye:
		if f.Gen != gen {
			errorf("goodbye stamped gen %s on gen %s", f.Gen, gen)
		}
	case *protocol.Chunk:
		if f.Gen != gen {
			errorf("chunk %s/%d stamped gen %s on gen %s", f.InstructionID, f.StreamSeq, f.Gen, gen)
		}
		if l.written[f.InstructionID] {
			errorf("chunk for %s, which the lane wrote off", f.InstructionID)
		}
		s := l.stream(f.InstructionID)
		if len(s.Results) > 0 {
			s.ResultBeforeChunk = true
			errorf("chunk %s/%d after the result", f.InstructionID, f.StreamSeq)
		}
		s.Copies[f.StreamSeq]++
		if old, ok := s.Chunks[f.StreamSeq]; ok {
			if old.Kind != f.Kind || !bytes.Equal(old.Data, f.Data) || old.ExitCode != f.ExitCode {
				errorf("retransmission of %s/%d changed its content", f.InstructionID, f.StreamSeq)
			}
		} else {
			cp := *f
			cp.Data = slices.Clone(f.Data)
			s.Chunks[f.StreamSeq] = cp
		}
		for {
			if _, ok := s.Chunks[s.Contiguous+1]; !ok {
				break
			}
			s.Contiguous++
		}
		n, b := 0, 0
		for seq, ch := range s.Chunks {
			if seq > s.LaneAcked {
				n++
				b += len(ch.Data)
			}
		}
		s.MaxOutstanding = max(s.MaxOutstanding, n)
		s.MaxOutstandingBytes = max(s.MaxOutstandingBytes, b)
		return &protocol.ChunkAck{Gen: gen, InstructionID: f.InstructionID, UpToStreamSeq: s.Contiguous}
	case *protocol.Result:
		if f.Gen != gen {
			errorf("result %s stamped gen %s on gen %s", f.InstructionID, f.Gen, gen)
		}
		if l.written[f.InstructionID] {
			errorf("result for %s, which the lane wrote off", f.InstructionID)
		}
		s := l.stream(f.InstructionID)
		for _, r := range s.Results {
			if r.DeviceSeq != f.DeviceSeq {
				errorf("result %s retransmitted with deviceSeq %d, first sent with %d", f.InstructionID, f.DeviceSeq, r.DeviceSeq)
			}
		}
		s.Results = append(s.Results, ResultRecord{Conn: c.N, Gen: f.Gen, DeviceSeq: f.DeviceSeq, Outcome: f.Outcome})
		return &protocol.ResultAck{Gen: gen, InstructionID: f.InstructionID}
	}
	return nil
}

// Stream returns a copy of what the lane holds for id.
func (l *Ledger) Stream(id string) Stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stream(id)
	cp := *s
	cp.Chunks = map[int64]protocol.Chunk{}
	for k, v := range s.Chunks {
		cp.Chunks[k] = v
	}
	cp.Copies = map[int64]int{}
	for k, v := range s.Copies {
		cp.Copies[k] = v
	}
	cp.Results = slices.Clone(s.Results)
	return cp
}

// Output concatenates the data of id's contiguous chunks of kind.
func (l *Ledger) Output(id string, kind protocol.ChunkKind) string {
	s := l.Stream(id)
	var b bytes.Buffer
	for seq := int64(0); seq <= s.Contiguous; seq++ {
		if c := s.Chunks[seq]; c.Kind == kind {
			b.Write(c.Data)
		}
	}
	return b.String()
}

// WaitFor waits until cond holds over the ledger.
func (l *Ledger) WaitFor(ctx context.Context, what string, cond func(l *Ledger) bool) error {
	for {
		l.mu.Lock()
		ch := l.change
		l.mu.Unlock()
		if cond(l) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fakelane: waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}

// WaitResult waits for the first result of id.
func (l *Ledger) WaitResult(ctx context.Context, id string) (ResultRecord, error) {
	var r ResultRecord
	err := l.WaitFor(ctx, "the result of "+id, func(l *Ledger) bool {
		s := l.Stream(id)
		if len(s.Results) > 0 {
			r = s.Results[0]
			return true
		}
		return false
	})
	return r, err
}

// WaitOutput waits until id's contiguous stdout contains want.
func (l *Ledger) WaitOutput(ctx context.Context, id, want string) error {
	return l.WaitFor(ctx, fmt.Sprintf("%q on the stdout of %s", want, id), func(l *Ledger) bool {
		return bytes.Contains([]byte(l.Output(id, protocol.ChunkStdout)), []byte(want))
	})
}
