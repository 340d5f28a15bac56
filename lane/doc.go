// Package lane is the core of the sema device lane's server side: the
// WebSocket endpoint executors connect to, the connection state machine and
// its writer, dispatch, calls, streams, the settled memo, leases, session
// binding, replica records and the hand-over decision, and the audit rows
// they write. The contract is ../shared/spec/device-executor-protocol.md;
// comments cite its sections (§1.2, §4, R1–R15).
//
// It has no HTTP API of its own: package httpapi serves that over a
// Server, and a Go program that embeds the lane calls Dispatch directly.
//
// Where to start reading:
//
//   - server.go: Server and New; config.go: Config and its defaults.
//   - doors.go: what the doors use beyond Dispatch (dispatch and cancel as
//     a caller, revoke, the audit sink, the WebSocket endpoint).
//   - ws.go, upgrade.go: the upgrade and Shutdown; conn.go, connstate.go:
//     one socket's life as a table of transitions (step); writer.go: the
//     one writer per socket.
//   - One instruction from the door to its outcome, file by file in order:
//     doors.go (DispatchFor, the door's call) → dispatch.go (the checks, the
//     queue on the device) → device.go (pump commits it when a slot is
//     free) → send.go (its frame, and a write's payload, on the
//     connection) → writer.go (onto the socket). The device's frames come
//     back through conn.go (the read loop) → frames.go (handleChunk,
//     handleResult: admitted by connstate.go's table) → stream.go (the
//     reorder buffer and the exit checks) → call.go (the Call's output,
//     which the caller reads with Call.Next) → settle.go (the result closes
//     the device's books on it and hands the caller its settlement) →
//     memo.go (its id in the settled memo). Each file once, in this order.
//   - leases.go, leasebatch.go, renewer.go: the connection leases (§1.4);
//     replica.go, cluster.go, handover.go: replicas on one registry.
//   - sessions.go: root session binding (§9); janitor.go prunes idle
//     bindings; periodic.go: the rounds both run on.
//   - auditevents.go: the audit trail's event names; the rows go to
//     the audit writer (package lane/audit), which batches them;
//     historyrow.go, history.go: the instruction history, one row per
//     settled call, written in batches off the call's path;
//     call.go's DeviceNotice: what a caller following the device hears
//     when its connection drops and comes back; metrics.go: the counters.
package lane
