package protocol

import "fmt"

// MessageKind is the WebSocket message type a frame arrived in.
type MessageKind int

const (
	TextMessage MessageKind = iota
	BinaryMessage
)

// DeviceFrameLimit is the frame cap that applies in a phase of the
// connection: MaxPreAuthFrameBytes until the handshake completes, then
// MaxFrameBytes (§1.2, §2.1).
func DeviceFrameLimit(handshakeDone bool) int {
	if handshakeDone {
		return MaxFrameBytes
	}
	return MaxPreAuthFrameBytes
}

// DecodeDeviceFrame decodes a device→server frame as the lane does (§2.4
// stage 1): the typed frame, or a *FrameError with exactly one reason.
// limit is the cap of the connection's phase (DeviceFrameLimit). The frame
// is checked in the spec's order: size, binary, JSON, object, t, shape.
// Unknown members are ignored; a repeated member name is bad_shape.
//
// The returned frame does not alias data.
func DecodeDeviceFrame(kind MessageKind, data []byte, limit int) (DeviceFrame, error) {
	if kind == TextMessage && len(data) <= limit {
		if c, ok := fastChunk(data); ok {
			return c, nil // the common case of every stream, verdict-equal to the strict path
		}
	}
	o, t, ferr := readEnvelope(kind, data, limit)
	if ferr != nil {
		return nil, ferr
	}
	var f DeviceFrame
	switch ft := DeviceFrameType(t); ft {
	case TypeHello:
		f = readHello(o)
	case TypeGenerationAck:
		f = &GenerationAck{Gen: o.gen()}
	case TypeHeartbeat:
		f = &Heartbeat{Gen: o.gen(), Seq: o.integer("seq", 0), Inflight: o.strings("inflight")}
	case TypeResult:
		f = &Result{
			Gen:           o.gen(),
			InstructionID: o.nonEmpty("instructionId"),
			DeviceSeq:     o.integer("deviceSeq", 0),
			Outcome:       readOutcome(o.obj("outcome")),
		}
	case TypeChunk:
		f = readChunk(o)
	case TypeGoodbye:
		f = readGoodbye(o)
	default:
		return nil, frameErr(ReasonUnknownType, "t %q is not a device frame type", clip(string(ft)))
	}
	if o.s.err != nil {
		return nil, o.s.err
	}
	return f, nil
}

// readEnvelope is stage 1 up to the type, in the spec's order (§2.4): the
// size cap, binary, JSON, object, and a string t, which it returns.
func readEnvelope(kind MessageKind, data []byte, limit int) (*object, string, *FrameError) {
	if len(data) > limit {
		return nil, "", frameErr(ReasonFrameTooLarge, "%d bytes is over the %d-byte cap", len(data), limit)
	}
	if kind != TextMessage {
		return nil, "", frameErr(ReasonNotJSON, "binary frames are refused; frames are JSON text")
	}
	o, ferr := readFrame(data)
	if ferr != nil {
		return nil, "", ferr
	}
	t, ok := o.get("t")
	if !ok || t[0] != '"' {
		return nil, "", frameErr(ReasonUnknownType, "the frame has no string t")
	}
	return o, string(unquote(t)), nil
}

// clip keeps an echoed value short.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func readHello(o *object) *Hello {
	h := &Hello{
		ProtocolVersion: o.intValue("protocolVersion", 0),
		DeviceID:        o.nonEmpty("deviceId"),
		Epoch:           o.str("epoch"),
		SignatureB64:    o.str("signatureB64"),
		WorkspaceRoot:   o.str("workspaceRoot"),
		PathFlavor:      o.str("pathFlavor"),
	}
	if p := o.obj("platform"); p != nil {
		h.Platform = Platform{OS: p.str("os"), Arch: p.str("arch"), ExecutorVersion: p.str("executorVersion")}
	}
	for _, s := range o.strings("supports") {
		h.Supports = append(h.Supports, InstructionKind(s))
	}
	if h.Supports == nil {
		h.Supports = []InstructionKind{}
	}
	if r := o.optObj("resuming"); r != nil {
		h.Resuming = &Resuming{UnackedResults: r.integer("unackedResults", 0)}
	}
	return h
}

// readChunk enforces the §4 table: stdout, stderr and data carry dataB64 and
// never exitCode; exit carries exitCode and never dataB64.
func readChunk(o *object) *Chunk {
	c := &Chunk{Gen: o.gen(), InstructionID: o.nonEmpty("instructionId"), StreamSeq: o.integer("streamSeq", 0)}
	kind, err := ParseChunkKind(o.str("kind"))
	if err != nil {
		o.s.fail("kind", "must be one of DEVICE_CHUNK_KINDS")
		return c
	}
	c.Kind = kind
	data, hasData := o.get("dataB64")
	_, hasExit := o.get("exitCode")
	if kind == ChunkExit {
		if hasData {
			o.s.fail("dataB64", "an exit chunk must not carry dataB64")
		}
		if !hasExit {
			o.s.fail("exitCode", "an exit chunk must carry exitCode")
		}
		c.ExitCode = o.intValue("exitCode", -MaxSafeInteger)
		return c
	}
	if hasExit {
		o.s.fail("exitCode", "a %s chunk must not carry exitCode", kind)
	}
	if !hasData {
		o.s.fail("dataB64", "a %s chunk must carry dataB64", kind)
		return c
	}
	c.Data, c.DataB64, c.pooled = o.b64Keeping("dataB64", data)
	return c
}

func readGoodbye(o *object) *Goodbye {
	g := &Goodbye{Gen: o.gen()}
	reason, err := ParseGoodbyeReason(o.str("reason"))
	if err != nil {
		o.s.fail("reason", "must be one of DEVICE_GOODBYE_REASONS")
	}
	g.Reason = reason
	if ms, ok := o.optInteger("graceMs", 0); ok {
		g.GraceMs = &ms
	}
	return g
}

// readOutcome reads a §3.3 outcome arm. Its fit to the instruction's kind is
// the lane's check (CheckOutcome); here only the arm's own shape counts.
func readOutcome(o *object) Outcome {
	if o == nil {
		return nil
	}
	if !o.boolean("ok") {
		code, err := ParseErrorCode(o.str("errorCode"))
		if err != nil {
			o.s.fail(o.path("errorCode"), "must be one of DEVICE_OUTCOME_ERROR_CODES")
		}
		return Failure{ErrorCode: code, Message: o.str("message")}
	}
	kind, err := ParseOutcomeKind(o.str("kind"))
	if err != nil {
		o.s.fail(o.path("kind"), "must be exec, read, stat, write, void or cancelled")
		return nil
	}
	switch kind {
	case OutcomeExec:
		e := ExecOutcome{ExitCode: o.intValue("exitCode", -MaxSafeInteger)}
		if t := o.optObj("truncated"); t != nil {
			out, _ := t.optBool("stdout")
			errs, _ := t.optBool("stderr")
			e.Truncated = &Truncated{Stdout: out != nil && *out, Stderr: errs != nil && *errs}
		}
		return e
	case OutcomeRead:
		return ReadOutcome{}
	case OutcomeStat:
		return readStat(o)
	case OutcomeWrite:
		w := WriteOutcome{CanonicalPath: o.nonEmpty("canonicalPath")}
		w.Inode, _ = o.optStr("inode")
		w.Created, _ = o.optBool("created")
		return w
	case OutcomeVoid:
		return VoidOutcome{}
	default: // OutcomeCancelled
		state, err := ParseCancelState(o.str("state"))
		if err != nil {
			o.s.fail(o.path("state"), "must be one of DEVICE_CANCEL_STATES")
		}
		return CancelledOutcome{State: state}
	}
}

func readStat(o *object) StatOutcome {
	var st StatOutcome
	if i := o.optObj("info"); i != nil {
		fi := readFileInfo(i)
		st.Info = &fi
	}
	if raw, ok := o.get("entries"); ok {
		if raw[0] != '[' {
			o.s.fail(o.path("entries"), "must be an array of WireFileInfo")
		} else {
			elems := children(raw)
			st.Entries = make([]FileInfo, 0, len(elems))
			for i, e := range elems {
				if eo := o.asObj(fmt.Sprintf("%s[%d]", o.path("entries"), i), e.raw); eo != nil {
					st.Entries = append(st.Entries, readFileInfo(eo))
				}
			}
		}
	}
	st.ExistsValue, _ = o.optBool("existsValue")
	if p, ok := o.optStr("canonicalPath"); ok {
		if p == "" {
			o.s.fail(o.path("canonicalPath"), "must be a non-empty path")
		}
		st.CanonicalPath = p
	}
	if raw, ok := o.get("linkTarget"); ok {
		if raw[0] == 'n' {
			st.LinkTarget = &LinkTarget{}
		} else {
			st.LinkTarget = &LinkTarget{IsSymlink: true, Target: o.asString("linkTarget", raw)}
		}
	}
	return st
}

func readFileInfo(o *object) FileInfo {
	fi := FileInfo{Path: o.str("path"), Size: o.integer("size", 0), MtimeMs: o.integer("mtimeMs", -MaxSafeInteger)}
	kind, err := ParseFileKind(o.str("kind"))
	if err != nil {
		o.s.fail(o.path("kind"), "must be file, dir, symlink or other")
	}
	fi.Kind = kind
	if m, ok := o.optInteger("mode", 0); ok {
		if m > 1<<32-1 {
			o.s.fail(o.path("mode"), "must fit 32 bits")
		}
		mode := uint32(m)
		fi.Mode = &mode
	}
	return fi
}
