package nexting

// unsignedWireFields is the codec's table of the top-level wire fields
// whose type is a canonical unsigned integer: the non-negative integer
// properties (u32, safeCounter, ttl, slots, indexes, channel) of the 21
// messages in the published schema. TestUnsignedWireFieldsMatchSchema
// derives the same set from testdata/message.schema.json, so this list
// cannot drift from the schema. ("v" is typed by the envelope check.)
//
// The published reference types these names at the top level of *every*
// message, not only of the messages that define them: {"seq":-1,…} on an
// open present, or {"rev":1e2,…} on an answer, is refused there although
// present and answer carry no seq or rev. This codec decides the same
// (docs/nexting.md, "Choices"). The reference types no other name outside
// its own messages, so neither does this codec: {"sum":5} on an answer is
// an ignored unknown field in both.
var unsignedWireFields = [...]string{
	"ttl", "seq", "rev", "cursor", "index", "slot", "channel",
	"input_tokens", "output_tokens", "cached_tokens", "context_used", "context_limit",
}

// checkTopLevelTypes refuses a top-level member named like an unsigned wire
// field whose value is not spelled 0|[1-9][0-9]* — in any message. The
// magnitude is not bounded here: a message that defines the field bounds
// it; one that does not ignores the value, as the reference does.
func checkTopLevelTypes(d *doc, root int32) *Error {
	for c := d.nodes[root].first; c >= 0; c = d.nodes[c].next {
		n := &d.nodes[c]
		if !contains(unsignedWireFields[:], n.name) {
			continue
		}
		if n.kind != '0' || !canonicalUnsigned(n.raw) {
			return badMessage(string(n.name), "a known wire field: must be a canonical unsigned integer in every message")
		}
	}
	return nil
}
