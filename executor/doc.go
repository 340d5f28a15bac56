// Package executor is the device side of the lane (`sema device serve`): it
// dials the lane over one WebSocket, proves itself with the device's
// Ed25519 key (§1.2), and runs the instructions it is sent at most once,
// with their output streamed back and acknowledged (§4, §5). The contract
// is ../shared/spec/device-executor-protocol.md; comments cite its
// sections. It never listens on a socket.
//
// Where to start reading:
//
//   - config.go: Config and its defaults; runtime.go: New and Run, the
//     reconnect loop (backoff.go), one session per socket.
//   - session.go: a socket's life: the signed hello, the fence of §1.5
//     against helloAck's pendingInstructions, generationAck, then the
//     read loop (receive.go) and the heartbeats.
//   - One instruction, file by file: receive.go (the frame decoded and
//     admitted: at most once, by its id) → table.go (its entry; the op
//     started, with approval first when --approve is on: gate.go) →
//     package ops (the work itself: a command, a file operation,
//     contained) → outbox.go (its chunks and result held until the lane
//     acknowledges them, re-sent after a reconnect from the watermarks,
//     R5–R8) → session.go's writer. journal_hooks.go records its start
//     and end in the device's journal (package journal).
//   - orphans*.go: process groups a crashed executor left behind, killed
//     before the first hello; status.go: the status file `sema device
//     status` reads; shutdown.go: goodbye and the drain (R15).
//   - Packages beside it: ops (the instruction kinds), sandbox (where a
//     command may read, write and connect), approve (the approval device),
//     journal (the device's own hash-chained record).
package executor
