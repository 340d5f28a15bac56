// Package nexting is the wire protocol of the nexting approval device (wire
// major 1): LF framing, a strict codec for the 21 messages of its nine
// profiles, Device Info parsing and negotiation. It does no I/O and keeps
// no connection state; the host and device state machines and the
// transports build on it. The normative text is the short spec
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
