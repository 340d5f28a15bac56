// Package nexting is the wire protocol of the nexting approval device (wire
// major 1): LF framing, a strict codec for the 21 messages of its nine
// profiles, Device Info parsing and negotiation — pure, no I/O, no
// connection state — and on top of it the host and device approval state
// machines (pure as well: the caller passes the time), the transports, the
// host Session and the device simulator. The normative text is the short spec
// (nexting-wire.md) with the published profile facts; testdata/ holds the
// published vectors and schema (see testdata/NOTICE) and the tests run
// every vector. docs/nexting.md documents the API and every choice made
// where the spec leaves room.
//
// Where to start:
//
//   - framer.go: Framer, the receiving line decoder. Feed it transport
//     chunks; it yields complete frames or framing errors.
//   - decode.go: Decode and DecodeFrame, the strict decoder returning one of
//     the message types or an *Error with the spec's code.
//   - encode.go: Encode, the canonical compact writer.
//   - messages.go and msg_*.go: one Go type per message, its bounds
//     (validate), its wire form (appendJSON) and its parser, grouped by
//     profile. enums.go holds the closed enums, profiles.go the type table.
//   - deviceinfo.go, vendor.go: ParseDeviceInfo.
//   - negotiate.go: Negotiate and Negotiated, the per-connection view that
//     gates profiles and applies the negotiated limits.
//   - errors.go, reply.go: Error and its Code, and Reply, which builds an
//     error message unless replying would amplify traffic.
//   - jsondoc.go, fields.go, validate.go: the strict JSON reader (jsontext)
//     and the shared field readers and validators underneath.
//   - host.go, device.go: Host and Device, the approval state machines.
//     Inputs take the current instant; Deadline says when to Tick.
//   - stream.go: Conn, and Stream, a Conn over any io.ReadWriter.
//   - ble.go: the GATT design's chunker (BLESplit) and reassembler, the
//     BLELink a stack adapter implements, and BLEConn over it. The adapter
//     for BlueZ is the separate package nexting/bleadapter.
//   - session.go: Session, the host end of a connection: OpenStream or
//     OpenBLE, then Ask(ctx, summary, ttl) → allow, deny, expired,
//     cancelled or lost.
//   - sim.go, simconn.go: Sim, the simulated device's logic, and SimConn,
//     which serves it on a stream.
//
// Typical receive path of a host after reading Device Info:
//
//	info, err := nexting.ParseDeviceInfo(raw)
//	neg, err := nexting.Negotiate(nexting.DefaultHostConfig(), info)
//	fr := neg.NewFramer()
//	for _, r := range fr.Feed(chunk) {
//		if r.Err != nil { /* maybe nexting.Reply(r.Err) */ continue }
//		msg, err := neg.Decode(r.Frame)
//		…
//	}
package nexting
