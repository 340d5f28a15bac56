package lane

import (
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// The streams whose bytes a history row counts (Call.outBytes).
const (
	historyStdout = iota
	historyStderr
	historyData
)

// countOutput counts a delivered chunk's bytes by its stream (the
// device's lock held).
func (c *Call) countOutput(ch protocol.Chunk) {
	switch ch.Kind {
	case protocol.ChunkStdout:
		c.outBytes[historyStdout] += int64(len(ch.Data))
	case protocol.ChunkStderr:
		c.outBytes[historyStderr] += int64(len(ch.Data))
	case protocol.ChunkData:
		c.outBytes[historyData] += int64(len(ch.Data))
	}
}

// historyRow is a settled call's history row (the device's lock held): who
// asked, what (protocol.Summary: the command, or its digest with
// Config.HistoryCommands digest; paths; byte counts; never content or
// output), when, and how it ended. The device's journal keeps the same
// summary and outcome words.
func (s *Server) historyRow(c *Call, o protocol.Outcome) store.HistoryRow {
	r := store.HistoryRow{
		InstructionID: c.ID, IdentityID: c.from.IdentityID, APIKeyID: c.from.APIKeyID, DeviceID: c.DeviceID,
		RootSessionID: c.frame.RootSessionID, Replica: s.historyReplica(), RemoteAddr: c.from.RemoteAddr,
		Kind: string(c.Kind), Summary: protocol.Summary(c.Kind, c.frame.Args, s.cfg.HistoryCommands == HistoryCommandsDigest),
		ReceivedAt: c.from.ReceivedAt, SettledAt: s.cfg.Clock.Now(), Outcome: protocol.OutcomeLabel(o),
		StdoutBytes: c.outBytes[historyStdout], StderrBytes: c.outBytes[historyStderr], DataBytes: c.outBytes[historyData],
	}
	if !c.dispatchedAt.IsZero() {
		at := c.dispatchedAt
		r.DispatchedAt = &at
	}
	if e, ok := o.(protocol.ExecOutcome); ok {
		code := e.ExitCode
		r.ExitCode = &code
		if e.Truncated != nil {
			r.TruncatedStdout, r.TruncatedStderr = e.Truncated.Stdout, e.Truncated.Stderr
		}
	}
	return r
}

// historyReplica names this replica in history rows: its id in a cluster,
// "" for a lane that is one replica alone.
func (s *Server) historyReplica() string {
	if s.cfg.AdvertiseURL == "" {
		return ""
	}
	return s.replica
}
