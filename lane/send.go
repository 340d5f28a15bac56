package lane

import (
	"fmt"
	"io"

	"github.com/sema-agent/sema/protocol"
)

// sendInstruction queues a committed instruction's frame (d.mu held, in
// issuedSeq order: pump) and, for the write family, starts the goroutine
// that sends its payload sub-sequence (§3.4): begin, chunks of
// PayloadPartBytes at ascending offsets, commit. A socket that fails closes
// the connection; the call stays committed and is never sent again (R1).
// Any other kind has no content, so the lane lets go of it here: its frame
// is encoded and the queue holds it.
func (c *conn) sendInstruction(call *Call) {
	frame := call.frame
	queued := c.send(&frame)
	if !queued || !call.Kind.IsWrite() {
		call.dropContent()
		return
	}
	// One goroutine per write in flight (at most MaxInflight), not per
	// frame: reading a streamed content may block, and the write loop must
	// not. Its owner is the connection that committed the call, whose
	// cleanup waits for it; it stops when the payload is queued, the call
	// is cancelled or settles, or the connection ends.
	c.payloads.Go(func() {
		defer call.dropContent()
		c.sendPayload(call, frame)
	})
}

// sendPayload queues a write's payload parts after its instruction frame.
//
// A streamed content (Instruction.ContentStream) is read here, one part at
// a time into one reused buffer, as the parts are queued; the payload
// window (writer.go) paces the reading by the socket. If it ends short or
// fails, no further chunk is sent and the commit still goes out with the
// declared length and digest: the device's check at the commit (§3.4)
// fails the instruction with no file, and the settlement's message says
// the content was short (contentShort). Once the call is cancelled or
// settled, nothing more of its payload is sent (nor read).
func (c *conn) sendPayload(call *Call, frame protocol.Instruction) {
	// BuildFrame put the length and digest in args (§3.4: the same values).
	w := frame.Args.(protocol.WriteArgs)
	sum, total := w.SHA256, w.ContentLen
	if !c.sendPart(&protocol.Payload{Gen: frame.Gen, InstructionID: call.ID, Part: protocol.PartBegin, TotalLen: total, SHA256: sum}) {
		return
	}
	parts := payloadParts{content: call.content, stream: call.upload, total: total, part: c.srv.cfg.PayloadPartBytes}
	for off := int64(0); off < total; {
		if c.srv.stopSending(call) {
			return
		}
		data, err := parts.next(off)
		if err != nil {
			c.srv.contentEnded(call, off, total, err)
			break
		}
		if !c.sendPart(&protocol.Payload{Gen: frame.Gen, InstructionID: call.ID, Part: protocol.PartChunk, Offset: off, Data: data}) {
			return
		}
		off += int64(len(data))
	}
	c.sendPart(&protocol.Payload{Gen: frame.Gen, InstructionID: call.ID, Part: protocol.PartCommit, TotalLen: total, SHA256: sum})
}

// payloadParts slices a write's content into parts: from the bytes in
// memory, or read from the stream into one buffer reused for every part
// (the caller sends a part before it asks for the next).
type payloadParts struct {
	content []byte
	stream  io.Reader
	total   int64
	part    int
	buf     []byte
}

// next returns the part at off (< total): at most part bytes.
func (p *payloadParts) next(off int64) ([]byte, error) {
	n := int(min(int64(p.part), p.total-off))
	if p.stream == nil {
		return p.content[off : off+int64(n)], nil
	}
	if p.buf == nil {
		p.buf = make([]byte, int(min(int64(p.part), p.total)))
	}
	m, err := io.ReadFull(p.stream, p.buf[:n])
	if err != nil {
		return nil, &shortContentError{got: off + int64(m), err: err}
	}
	return p.buf[:n], nil
}

// shortContentError: the stream ended or failed after got bytes.
type shortContentError struct {
	got int64
	err error
}

func (e *shortContentError) Error() string { return e.err.Error() }

// stopSending reports whether a call's payload should stop: it was
// cancelled or has settled, so nobody will use the rest.
func (s *Server) stopSending(call *Call) bool {
	d := s.device(call.DeviceID)
	d.mu.Lock()
	defer d.mu.Unlock()
	return call.cancelWant || call.state != protocol.StateDispatchCommitted
}

// contentEnded records that a streamed content ended before its declared
// length, for the settlement's message (see settle).
func (s *Server) contentEnded(call *Call, off, total int64, err error) {
	got := off
	if short, ok := err.(*shortContentError); ok {
		got, err = short.got, short.err
	}
	why := "it ended"
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		why = "reading it failed: " + err.Error()
	}
	d := s.device(call.DeviceID)
	d.mu.Lock()
	defer d.mu.Unlock()
	call.contentShort = fmt.Sprintf("the upload was short: the content ended after %d of the %d bytes declared (%s)", got, total, why)
}
