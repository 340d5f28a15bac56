package nexting

// Decode decodes one delimiter-stripped frame: the JSON object a line
// decoder (Framer) yields, without its LF (short spec §1: "A raw decode API
// gets delimiter-stripped JSON from its line decoder"). It returns one of
// the 21 message value types, or an *Error carrying the spec's code:
//
//   - message_too_large: len(data)+1 > MaxFrameBytes.
//   - bad_message: anything malformed — not compact UTF-8 JSON, not an
//     object, a duplicate name at any depth (also spelled with escapes), a
//     decoded U+0000, nesting deeper than eight levels, "v" or "t" missing
//     or mistyped, a non-canonical "v" (1.0, 1e0, -0), an unknown type, a
//     missing or unknown (closed messages) field, a value out of bounds, a
//     top-level member named like an unsigned wire field (seq, rev, ttl …)
//     that is not a canonical unsigned integer, in any message.
//   - unsupported_version: "v" is a canonical unsigned integer other than 1.
//
// Decode knows no negotiation: it accepts all 21 types. After Device Info,
// decode with Negotiated.Decode, which also refuses unsupported_profile and
// applies the negotiated frame limit.
func Decode(data []byte) (Message, error) { return decode(data, MaxFrameBytes, nil) }

// DecodeFrame decodes one complete frame: the JSON object and exactly one
// trailing LF.
func DecodeFrame(frame []byte) (Message, error) { return decodeFrame(frame, MaxFrameBytes, nil) }

func decodeFrame(frame []byte, max int, allowed *profileSet) (Message, error) {
	if len(frame) > max {
		return nil, tooLarge(len(frame), max)
	}
	if len(frame) == 0 || frame[len(frame)-1] != '\n' {
		e := badMessage("", "frame does not end with LF")
		e.Size = len(frame)
		return nil, e
	}
	return decode(frame[:len(frame)-1], max, allowed)
}

// decode is the one decoding path. The order of checks fixes which code a
// frame with several faults gets: size, then JSON well-formedness, then the
// version, then the type, then the profile, then the fields.
func decode(data []byte, max int, allowed *profileSet) (Message, error) {
	size := len(data) + 1 // the LF counts toward the limit
	if size > max {
		return nil, tooLarge(size, max)
	}
	d := getDoc()
	defer putDoc(d)
	if e := d.parse(data, true); e != nil {
		e.Size = size
		return nil, e
	}
	m, e := decodeEnvelope(d, allowed)
	if e != nil {
		e.Size = size
		return nil, e
	}
	return m, nil
}

// decodeEnvelope checks "v" and "t", gates the profile, then runs the
// type's parser and validator.
func decodeEnvelope(d *doc, allowed *profileSet) (Message, *Error) {
	const root = 0
	var info *typeInfo
	tn := d.member(root, "t")
	if tn >= 0 && d.nodes[tn].kind == '"' {
		info = lookupType(d.nodes[tn].str)
	}
	fail := func(e *Error) (Message, *Error) {
		if info != nil {
			e.Type = info.t // known even when v is wrong: Reply never answers an error
		}
		return nil, e
	}

	vn := d.member(root, "v")
	switch {
	case vn < 0:
		return fail(badMessage("v", "required field is missing"))
	case d.nodes[vn].kind != '0' || !canonicalUnsigned(d.nodes[vn].raw):
		return fail(badMessage("v", "must be the canonical unsigned integer 1"))
	case string(d.nodes[vn].raw) != "1":
		return fail(&Error{Code: CodeUnsupportedVersion, Field: "v", Detail: "wire major not supported"})
	}

	switch {
	case tn < 0:
		return fail(badMessage("t", "required field is missing"))
	case d.nodes[tn].kind != '"':
		return fail(badMessage("t", "must be a string"))
	case info == nil:
		return fail(badMessage("t", "unknown message type"))
	}

	// From here the type is known: errors carry it, and the request id when
	// the frame has a valid one (so a reply can name the request).
	withID := func(e *Error) (Message, *Error) {
		e.Type = info.t
		if in := d.member(root, "id"); in >= 0 && d.nodes[in].kind == '"' && validID(string(d.nodes[in].str)) {
			e.ID = string(d.nodes[in].str)
		}
		return nil, e
	}
	if allowed != nil && !allowed.has(info.profile) {
		return withID(&Error{Code: CodeUnsupportedProfile, Field: "t", Detail: "profile " + string(info.profile) + " not negotiated"})
	}
	r := reader{d: d, root: root}
	m := info.parse(&r)
	if r.err != nil {
		return withID(r.err)
	}
	if e := m.validate(); e != nil {
		return withID(e)
	}
	if e := checkTopLevelTypes(d, root); e != nil {
		return withID(e)
	}
	return m, nil
}

// canonicalUnsigned reports the spelling 0|[1-9][0-9]* (the tokenizer has
// already refused leading zeros, so only sign, fraction and exponent
// remain to be ruled out).
func canonicalUnsigned(raw []byte) bool {
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(raw) > 0
}
