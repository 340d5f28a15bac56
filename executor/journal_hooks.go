package executor

import (
	"github.com/sema-agent/sema/executor/journal"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// The device's journal (executor/journal, Config.Journal): a record when an
// instruction's op is about to begin, one when its result is produced.
// Appending hands the record to the journal's writer and returns: the
// instruction never waits for the disk.

// journalStart records that e's op is about to begin.
func (rt *Runtime) journalStart(e *entry, req ops.Request) {
	if rt.cfg.Journal == nil {
		return
	}
	rt.cfg.Journal.Append(journal.Record{
		Event: journal.EventStart, InstructionID: e.id, Kind: string(e.kind),
		Summary: protocol.Summary(e.kind, req.Args, rt.cfg.JournalDigestCommands),
	})
}

// journalEnd records e's one result, with its approval decision and what
// its op sent.
func (rt *Runtime) journalEnd(e *entry, out protocol.Outcome) {
	if rt.cfg.Journal == nil {
		return
	}
	r := journal.Record{
		Event: journal.EventEnd, InstructionID: e.id, Kind: string(e.kind),
		Stdout: e.sentOut.Load(), Stderr: e.sentErr.Load(), Data: e.sentData.Load(),
	}
	if a, ok := e.approval.Load().(string); ok {
		r.Approval = a
	}
	r.Outcome = protocol.OutcomeLabel(out)
	if o, ok := out.(protocol.ExecOutcome); ok {
		code := o.ExitCode
		r.ExitCode = &code
		r.Truncated = o.Truncated != nil
	}
	rt.cfg.Journal.Append(r)
}
