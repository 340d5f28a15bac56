package lane

import (
	"fmt"

	"github.com/sema-agent/sema/protocol"
)

// stream is the acceptance state of one instruction's output (§4): the
// cumulative watermark, the bounded reorder buffer, and the exec stream
// checks. It is pure: no I/O, no clock; the connection drives the gap timer
// from hasGap.
type stream struct {
	kind       protocol.InstructionKind
	watermark  int64 // the highest contiguous accepted streamSeq; -1 for none
	buffer     map[int64]protocol.Chunk
	bufBytes   int
	maxEntries int
	maxBytes   int
	exitSeen   bool
	exitCode   int
	delivered  int64 // chunks delivered
}

func newStream(kind protocol.InstructionKind, maxEntries, maxBytes int) *stream {
	return &stream{kind: kind, watermark: -1, maxEntries: maxEntries, maxBytes: maxBytes}
}

// streamViolation is a stream that can no longer be reported faithfully:
// the instruction settles outcome_unknown (R8, §4).
type streamViolation struct{ reason string }

func (v *streamViolation) Error() string { return v.reason }

func violation(format string, args ...any) *streamViolation {
	return &streamViolation{reason: fmt.Sprintf(format, args...)}
}

// accept takes one chunk frame. It returns the chunks now deliverable in
// order (possibly none: a duplicate or a buffered out-of-order chunk), or
// a violation. The caller acks the watermark after every accepted frame.
func (s *stream) accept(c protocol.Chunk) ([]protocol.Chunk, error) {
	if c.StreamSeq <= s.watermark {
		return nil, nil // R7: at or below the watermark, absorbed and re-acked
	}
	if c.StreamSeq > s.watermark+1 {
		if _, ok := s.buffer[c.StreamSeq]; ok {
			return nil, nil // first write wins
		}
		if s.buffer == nil {
			s.buffer = map[int64]protocol.Chunk{}
		}
		s.buffer[c.StreamSeq] = c
		s.bufBytes += len(c.Data)
		if len(s.buffer) > s.maxEntries || s.bufBytes > s.maxBytes {
			return nil, violation("the reorder buffer overflowed (%d entries, %d bytes) waiting for streamSeq %d", len(s.buffer), s.bufBytes, s.watermark+1)
		}
		return nil, nil
	}
	out := []protocol.Chunk{c}
	s.watermark = c.StreamSeq
	for {
		next, ok := s.buffer[s.watermark+1]
		if !ok {
			break
		}
		delete(s.buffer, s.watermark+1)
		s.bufBytes -= len(next.Data)
		s.watermark++
		out = append(out, next)
	}
	for _, d := range out {
		if err := s.deliver(d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deliver applies the §4 rules to a chunk in stream order.
func (s *stream) deliver(c protocol.Chunk) error {
	if s.exitSeen {
		return violation("streamSeq %d (%s) arrived after the exit chunk: exit must be the last chunk, and only one", c.StreamSeq, c.Kind)
	}
	switch {
	case s.kind.IsExec():
		if c.Kind == protocol.ChunkData {
			return violation("an exec stream carries stdout, stderr and exit chunks, not data")
		}
	case protocol.SuccessKind(s.kind) == protocol.OutcomeRead:
		if c.Kind != protocol.ChunkData {
			return violation("a read stream carries data chunks only, got %s", c.Kind)
		}
	default:
		return violation("%s instructions have no output stream, got a %s chunk", s.kind, c.Kind)
	}
	if c.Kind == protocol.ChunkExit {
		s.exitSeen, s.exitCode = true, c.ExitCode
	}
	s.delivered++
	return nil
}

// hasGap reports whether chunks wait behind a missing streamSeq.
func (s *stream) hasGap() bool { return len(s.buffer) > 0 }

// checkTerminal is the cross-check of a result against its stream (§4):
// no gap may remain, and a successful exec outcome needs exactly one exit
// chunk, delivered last, with the same exit code. Failure and cancelled
// outcomes make no claim about the stream.
func (s *stream) checkTerminal(o protocol.Outcome) error {
	if !o.OK() || o.Kind() == protocol.OutcomeCancelled {
		return nil
	}
	if s.hasGap() {
		return violation("the result arrived while streamSeq %d was still missing", s.watermark+1)
	}
	if e, ok := o.(protocol.ExecOutcome); ok {
		if !s.exitSeen {
			return violation("a successful exec outcome without an exit chunk: a missing tail is indistinguishable from a truncated one")
		}
		if e.ExitCode != s.exitCode {
			return violation("the exit chunk says %d and the result says %d", s.exitCode, e.ExitCode)
		}
	}
	return nil
}
