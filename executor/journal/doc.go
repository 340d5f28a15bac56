// Package journal is the device's own record of what it ran: an append-only,
// hash-chained file in the executor's state dir, kept by the executor and
// checkable on the machine without trusting the lane.
//
// Start with Record (one line of the file) and Digest (the chain rule), then
// Journal (the writer: one goroutine owns the file, batches records, fsyncs
// each batch, rotates by size without breaking the chain), then Read and
// Verify (the reader behind `sema device log` and `sema device log verify`).
//
// A record holds what a person needs to know what ran — when, which
// instruction, its kind, a one-line summary (protocol.Summary: the command,
// paths, byte counts), the approval decision, the outcome, the exit code and
// byte counts — and never a file's content or a command's output.
package journal
