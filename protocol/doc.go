// Package protocol is the wire contract of the sema device lane, both
// directions, with no I/O: the single source of truth that the executor
// (the device side) and the lane server import. The normative text is the
// device executor protocol (a copy lives in testdata/, and the tests check
// the code against its tables).
//
// Where to start:
//
//   - closedsets.go: every closed set of the spec as typed constants, a
//     list of all members and a Parse that refuses anything else.
//   - constants.go: DEVICE_CONSTANTS, DEVICE_WS_LIMITS and the lane's named
//     defaults.
//   - frames_device.go, frames_server.go, outcome.go, args.go: Go types for
//     every frame and outcome arm. A frame's MarshalJSON returns exactly its
//     wire form (encoding/json also works, but re-escapes <, > and &).
//   - hello.go, ulid.go: the hello signature payload and the strict epoch
//     decoder (§1.3).
//   - decode_device.go: DecodeDeviceFrame, the lane's strict stage-1 decoder
//     (§2.4), returning a typed frame or a *FrameError with one reason.
//   - decode_server.go: DecodeServerFrame, the executor's decoder (§2.3).
//   - check.go: the lane's outcome checks (§3.1, §3.3).
//
// Choices the spec leaves open, made here:
//
//   - Integers are judged by their spelling: -?(0|[1-9][0-9]*) with a
//     magnitude of at most 2^53−1. 1.0 and 1e3 are refused as floats.
//   - A repeated member name, at any depth, is bad_shape: the frame is JSON
//     but ambiguous. Invalid UTF-8, a lone surrogate escape ("\ud800") and
//     a byte-order mark are not_json (RFC 8259 §8.1, RFC 7493).
//   - Unknown members are ignored in both directions (forward compatible).
//   - Paths and cwd in instructions must be absolute and POSIX-normalized
//     (ValidAbsPath); anything else is answered invalid, never resolved.
//   - A sha256 is read in either case and written in lower case.
//   - Encoders hold what they emit to the peer's decoder: a frame the peer
//     would refuse (an out-of-range number, an empty id, a Result over the
//     1 MiB cap, a hello over the 4096-byte pre-auth cap) is an encoding
//     error at the source, not a lost frame on the wire.
package protocol
