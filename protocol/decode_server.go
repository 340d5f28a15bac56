package protocol

import "fmt"

// DecodeServerFrame decodes a server→device frame as the executor does
// (§2.3): the typed frame, or an error. Unknown members are ignored, ping is
// accepted, and every known field is held to its type and range, as the lane
// holds the device's frames (the error is a *FrameError with the same
// reasons). A frame over MaxFrameBytes is refused frame_too_large.
//
// An instruction whose envelope is sound but whose kind is unknown, or whose
// args or cwd do not fit its kind, is returned as an *InstructionError: the
// executor must still answer it (§5.0; §7 "answer not_supported rather than
// guessing").
//
// The returned frame does not alias data.
func DecodeServerFrame(kind MessageKind, data []byte) (ServerFrame, error) {
	if kind == TextMessage && len(data) <= MaxFrameBytes {
		if p, ok := fastPayload(data); ok {
			return p, nil // every chunk of a write, verdict-equal to the strict path
		}
	}
	o, t, ferr := readEnvelope(kind, data, MaxFrameBytes)
	if ferr != nil {
		return nil, ferr
	}
	var f ServerFrame
	switch ft := ServerFrameType(t); ft {
	case TypeChallenge:
		f = &Challenge{Nonce: o.nonEmpty("nonce"), ProtocolVersion: o.intValue("protocolVersion", 0)}
	case TypeHelloAck:
		f = readHelloAck(o)
	case TypeHelloReject:
		f = readHelloReject(o)
	case TypeInstruction:
		return readInstruction(o)
	case TypePayload:
		f = readPayload(o)
	case TypeCancel:
		f = &Cancel{Gen: o.gen(), InstructionID: o.nonEmpty("instructionId")}
	case TypeResultAck:
		f = &ResultAck{Gen: o.gen(), InstructionID: o.nonEmpty("instructionId")}
	case TypeChunkAck:
		f = &ChunkAck{Gen: o.gen(), InstructionID: o.nonEmpty("instructionId"), UpToStreamSeq: o.integer("upToStreamSeq", -1)}
	case TypeBye:
		b := &Bye{Gen: o.gen()}
		reason, err := ParseByeReason(o.str("reason"))
		if err != nil {
			o.s.fail("reason", "must be one of DEVICE_BYE_REASONS")
		}
		b.Reason = reason
		f = b
	case TypePing:
		f = &Ping{}
	default:
		return nil, frameErr(ReasonUnknownType, "t %q is not a server frame type", clip(string(ft)))
	}
	if o.s.err != nil {
		return nil, o.s.err
	}
	return f, nil
}

func readHelloAck(o *object) *HelloAck {
	if !o.boolean("ok") {
		o.s.fail("ok", "must be true")
	}
	a := &HelloAck{
		HeartbeatIntervalMs: o.integer("heartbeatIntervalMs", 1),
		MaxInflight:         o.intValue("maxInflight", 1),
		Gen:                 o.gen(),
		PendingInstructions: o.strings("pendingInstructions"),
		ChunkWatermarks:     map[string]int64{},
	}
	if w := o.obj("chunkWatermarks"); w != nil {
		for _, m := range w.members {
			a.ChunkWatermarks[m.name] = w.asInt(m.name, m.raw, -1)
		}
	}
	return a
}

func readHelloReject(o *object) *HelloReject {
	r := &HelloReject{}
	code, err := ParseHelloRejectCode(o.str("code"))
	if err != nil {
		o.s.fail("code", "must be one of DEVICE_HELLO_REJECT_CODES")
	}
	r.Code = code
	if _, ok := o.get("minProtocolVersion"); ok {
		n := o.intValue("minProtocolVersion", 0)
		r.MinProtocolVersion = &n
	}
	return r
}

func readPayload(o *object) *Payload {
	p := &Payload{Gen: o.gen(), InstructionID: o.nonEmpty("instructionId")}
	part, err := ParsePayloadPart(o.str("part"))
	if err != nil {
		o.s.fail("part", "must be begin, chunk or commit")
		return p
	}
	p.Part = part
	_, hasData := o.get("dataB64")
	_, hasOffset := o.get("offset")
	_, hasLen := o.get("totalLen")
	_, hasSum := o.get("sha256")
	if part == PartChunk {
		if hasLen || hasSum {
			o.s.fail("part", "a chunk part carries offset and dataB64, not totalLen or sha256")
		}
		p.Offset = o.integer("offset", 0)
		if raw, ok := o.need("dataB64"); ok {
			p.Data = o.b64("dataB64", raw)
		}
		return p
	}
	if hasData || hasOffset {
		o.s.fail("part", "a %s part carries totalLen and sha256, not offset or dataB64", part)
	}
	p.TotalLen = o.integer("totalLen", 0)
	p.SHA256 = o.digest("sha256")
	return p
}

func (o *object) digest(name string) Digest {
	s := o.str(name)
	d, err := ParseDigest(s)
	if err != nil {
		o.s.fail(o.path(name), "%v", err)
	}
	return d
}

// readInstruction checks the envelope as a frame, then the kind, cwd and
// args as an answerable InstructionError.
func readInstruction(o *object) (ServerFrame, error) {
	in := &Instruction{
		Gen:           o.gen(),
		InstructionID: o.nonEmpty("instructionId"),
		RootSessionID: o.str("rootSessionId"),
		IssuedSeq:     o.integer("issuedSeq", 0),
		Kind:          InstructionKind(o.str("kind")),
		TimeoutMs:     o.integer("timeoutMs", 0),
	}
	in.Cwd, _ = o.optStr("cwd")
	if env := o.optObj("shellEnv"); env != nil {
		in.ShellEnv = make(map[string]string, len(env.members))
		for _, m := range env.members {
			in.ShellEnv[m.name] = env.asString(m.name, m.raw)
		}
	}
	args := o.obj("args")
	if o.s.err != nil {
		return nil, o.s.err
	}
	ie := func(code ErrorCode, format string, a ...any) error {
		return &InstructionError{InstructionID: in.InstructionID, Kind: in.Kind, Code: code, Detail: fmt.Sprintf(format, a...)}
	}
	if !in.Kind.Valid() {
		return nil, ie(ErrNotSupported, "instruction kind %q is not supported by this executor", clip(string(in.Kind)))
	}
	if _, ok := o.get("cwd"); ok && !ValidAbsPath(in.Cwd) {
		return nil, ie(ErrInvalid, "cwd must be an absolute, normalized path")
	}
	in.Args = readArgs(in.Kind, args)
	if args.s.err != nil {
		return nil, ie(ErrInvalid, "%s: %s", args.s.err.Field, args.s.err.Detail)
	}
	return in, nil
}

// readArgs reads the §3.1 args of kind k (a member of the set).
func readArgs(k InstructionKind, o *object) Args {
	path := func(name string) string {
		p := o.str(name)
		if o.s.err == nil && !ValidAbsPath(p) {
			o.s.fail(o.path(name), "must be an absolute, normalized path")
		}
		return p
	}
	switch k {
	case KindExec, KindExecStream:
		return CommandArgs{Command: o.str("command")}
	case KindReadTextLines:
		a := ReadLinesArgs{Path: path("path")}
		if v, ok := o.optInteger("offset", 0); ok {
			a.Offset = &v
		}
		if v, ok := o.optInteger("limit", 0); ok {
			a.Limit = &v
		}
		return a
	case KindWriteFile, KindWriteFileExclusive, KindWriteFileGuarded, KindAppendFile:
		a := WriteArgs{Path: path("path"), ContentLen: o.integer("contentLen", 0), SHA256: o.digest("sha256")}
		if k == KindWriteFileGuarded {
			if e := o.obj("expect"); e != nil {
				a.Expect = &Expect{CanonicalPath: e.nonEmpty("canonicalPath")}
				a.Expect.FileID, _ = e.optStr("fileId")
				if b, ok := e.optBool("exclusive"); ok {
					a.Expect.Exclusive = *b
				}
				if b, ok := e.optBool("noFollow"); ok {
					a.Expect.NoFollow = *b
				}
			}
		}
		return a
	case KindCreateDir, KindRemove:
		a := DirArgs{Path: path("path")}
		a.Recursive, _ = o.optBool("recursive")
		return a
	case KindCreateTempDir:
		a := TempDirArgs{}
		a.Prefix, _ = o.optStr("prefix")
		return a
	case KindCreateTempFile:
		a := TempFileArgs{}
		a.Prefix, _ = o.optStr("prefix")
		a.Suffix, _ = o.optStr("suffix")
		return a
	case KindStatBatch:
		a := StatBatchArgs{Paths: o.strings("paths")}
		for i, p := range a.Paths {
			if !ValidAbsPath(p) {
				o.s.fail(fmt.Sprintf("args.paths[%d]", i), "must be an absolute, normalized path")
			}
		}
		return a
	default: // the PathArgs kinds
		return PathArgs{Path: path("path")}
	}
}

// DecodeArgs reads the args object of an instruction of kind k with the
// same rules the executor applies (paths absolute and normalized, digests
// of 64 hex characters, safe integers, …). The error names the field.
func DecodeArgs(k InstructionKind, raw []byte) (Args, error) {
	if !k.Valid() {
		return nil, &UnknownMemberError{Set: instructionKinds.name, Value: string(k)}
	}
	o, ferr := readFrame(raw)
	if ferr != nil {
		return nil, fmt.Errorf("args: must be a JSON object")
	}
	o.prefix = "args"
	a := readArgs(k, o)
	if o.s.err != nil {
		return nil, fmt.Errorf("%s: %s", o.s.err.Field, o.s.err.Detail)
	}
	return a, nil
}
