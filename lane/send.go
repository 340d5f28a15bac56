package lane

import (
	"github.com/sema-agent/sema/protocol"
)

// sendInstruction writes a committed instruction and, for the write family,
// its payload sub-sequence at once (§3.4): begin, chunks of
// PayloadPartBytes at ascending offsets, commit. A failed write closes the
// socket; the call stays committed and is never sent again (R1).
func (c *conn) sendInstruction(call *Call, frame protocol.Instruction) {
	defer call.dropContent()
	err := c.write(&frame)
	close(call.sent)
	if err != nil || !call.Kind.IsWrite() {
		return
	}
	content := call.content
	// buildFrame put the length and digest in args (§3.4: the same values).
	w := frame.Args.(protocol.WriteArgs)
	sum, total := w.SHA256, w.ContentLen
	p := &protocol.Payload{Gen: frame.Gen, InstructionID: call.ID, Part: protocol.PartBegin, TotalLen: total, SHA256: sum}
	if c.write(p) != nil {
		return
	}
	part := c.srv.cfg.PayloadPartBytes
	for off := 0; off < len(content); off += part {
		end := min(off+part, len(content))
		if c.write(&protocol.Payload{Gen: frame.Gen, InstructionID: call.ID, Part: protocol.PartChunk, Offset: int64(off), Data: content[off:end]}) != nil {
			return
		}
	}
	c.write(&protocol.Payload{Gen: frame.Gen, InstructionID: call.ID, Part: protocol.PartCommit, TotalLen: total, SHA256: sum})
}
