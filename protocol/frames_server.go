package protocol

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sema-agent/sema/internal/b64"
)

// ServerFrame is a server→device frame (§2.3): *Challenge, *HelloAck,
// *HelloReject, *Instruction, *Payload, *Cancel, *ResultAck, *ChunkAck, *Bye
// or *Ping. Each marshals to exactly its wire form, t first.
type ServerFrame interface {
	Type() ServerFrameType
	// MarshalJSON returns exactly the wire form.
	MarshalJSON() ([]byte, error)
	isServerFrame()
}

// Challenge is the first frame the server sends, immediately on open.
type Challenge struct {
	Nonce           string `json:"nonce"`
	ProtocolVersion int    `json:"protocolVersion"`
}

// HelloAck accepts a hello (§1.5); ok is always true on the wire.
type HelloAck struct {
	HeartbeatIntervalMs int64 `json:"heartbeatIntervalMs"`
	MaxInflight         int   `json:"maxInflight"`
	Gen                 Gen   `json:"gen"`
	// PendingInstructions is authoritative: keep these, kill everything else.
	PendingInstructions []string `json:"pendingInstructions"`
	// ChunkWatermarks: per instruction, the highest contiguous streamSeq
	// accepted; -1 means nothing yet.
	ChunkWatermarks map[string]int64 `json:"chunkWatermarks"`
}

// HelloReject refuses a hello (§1.4); the socket closes right after.
// MinProtocolVersion is absent when nil.
type HelloReject struct {
	Code               HelloRejectCode `json:"code"`
	MinProtocolVersion *int            `json:"minProtocolVersion,omitzero"`
}

// Instruction is one unit of work (§3). Args must be the Args type of Kind
// (ArgsFits). Cwd is absent when empty, ShellEnv when nil.
type Instruction struct {
	Gen           Gen               `json:"gen"`
	InstructionID string            `json:"instructionId"`
	RootSessionID string            `json:"rootSessionId"`
	IssuedSeq     int64             `json:"issuedSeq"`
	Kind          InstructionKind   `json:"kind"`
	Args          Args              `json:"args"`
	Cwd           string            `json:"cwd,omitzero"`
	ShellEnv      map[string]string `json:"shellEnv,omitzero"`
	TimeoutMs     int64             `json:"timeoutMs"`
}

// Payload carries the bytes of a write-family instruction (§3.4). Part
// decides the wire fields: begin and commit carry TotalLen and SHA256; chunk
// carries Offset and Data (an empty Data is sent as "").
type Payload struct {
	Gen           Gen
	InstructionID string
	Part          PayloadPart
	Offset        int64
	Data          []byte
	TotalLen      int64
	SHA256        Digest
}

// Cancel asks for a terminal result for an instruction (R11).
type Cancel struct {
	Gen           Gen    `json:"gen"`
	InstructionID string `json:"instructionId"`
}

// ResultAck releases a result's buffers; it is not an acceptance receipt.
type ResultAck struct {
	Gen           Gen    `json:"gen"`
	InstructionID string `json:"instructionId"`
}

// ChunkAck is a cumulative watermark: chunks at or below it are accepted.
type ChunkAck struct {
	Gen           Gen    `json:"gen"`
	InstructionID string `json:"instructionId"`
	UpToStreamSeq int64  `json:"upToStreamSeq"`
}

// Bye drops the connection (R13).
type Bye struct {
	Gen    Gen       `json:"gen"`
	Reason ByeReason `json:"reason"`
}

// Ping is declared but never sent today (§8).
type Ping struct{}

func (*Challenge) Type() ServerFrameType   { return TypeChallenge }
func (*HelloAck) Type() ServerFrameType    { return TypeHelloAck }
func (*HelloReject) Type() ServerFrameType { return TypeHelloReject }
func (*Instruction) Type() ServerFrameType { return TypeInstruction }
func (*Payload) Type() ServerFrameType     { return TypePayload }
func (*Cancel) Type() ServerFrameType      { return TypeCancel }
func (*ResultAck) Type() ServerFrameType   { return TypeResultAck }
func (*ChunkAck) Type() ServerFrameType    { return TypeChunkAck }
func (*Bye) Type() ServerFrameType         { return TypeBye }
func (*Ping) Type() ServerFrameType        { return TypePing }

func (*Challenge) isServerFrame()   {}
func (*HelloAck) isServerFrame()    {}
func (*HelloReject) isServerFrame() {}
func (*Instruction) isServerFrame() {}
func (*Payload) isServerFrame()     {}
func (*Cancel) isServerFrame()      {}
func (*ResultAck) isServerFrame()   {}
func (*ChunkAck) isServerFrame()    {}
func (*Bye) isServerFrame()         {}
func (*Ping) isServerFrame()        {}

// encodeServer marshals a frame's wire struct, map keys sorted so equal
// frames encode to equal bytes, and holds the bytes to the executor's
// decoder: this package never emits a frame the executor would refuse,
// nor an instruction it would have to answer invalid.
func encodeServer(v any) ([]byte, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	if _, err := DecodeServerFrame(TextMessage, b); err != nil {
		return nil, fmt.Errorf("protocol: refusing to encode a frame the executor would refuse: %w", err)
	}
	return b, nil
}

func (f *Challenge) MarshalJSON() ([]byte, error) {
	type wire Challenge
	return encodeServer(struct {
		T ServerFrameType `json:"t"`
		wire
	}{TypeChallenge, wire(*f)})
}

func (f *HelloAck) MarshalJSON() ([]byte, error) {
	type wire HelloAck
	w := wire(*f)
	if w.PendingInstructions == nil {
		w.PendingInstructions = []string{}
	}
	if w.ChunkWatermarks == nil {
		w.ChunkWatermarks = map[string]int64{}
	}
	return encodeServer(struct {
		T  ServerFrameType `json:"t"`
		OK bool            `json:"ok"`
		wire
	}{TypeHelloAck, true, w})
}

func (f *HelloReject) MarshalJSON() ([]byte, error) {
	if !f.Code.Valid() {
		return nil, &UnknownMemberError{Set: helloRejectCodes.name, Value: string(f.Code)}
	}
	type wire HelloReject
	return encodeServer(struct {
		T ServerFrameType `json:"t"`
		wire
	}{TypeHelloReject, wire(*f)})
}

func (f *Instruction) MarshalJSON() ([]byte, error) {
	if !ArgsFits(f.Kind, f.Args) {
		return nil, fmt.Errorf("protocol: args %T do not fit instruction kind %q", f.Args, f.Kind)
	}
	type wire Instruction
	return encodeServer(struct {
		T ServerFrameType `json:"t"`
		wire
	}{TypeInstruction, wire(*f)})
}

func (f *Cancel) MarshalJSON() ([]byte, error) {
	type wire Cancel
	return encodeServer(struct {
		T ServerFrameType `json:"t"`
		wire
	}{TypeCancel, wire(*f)})
}

// MarshalJSON writes the ack by hand, like ChunkAck: one goes out per
// result, on the round trip a caller waits for.
func (f *ResultAck) MarshalJSON() ([]byte, error) {
	if f.InstructionID == "" {
		return nil, fmt.Errorf("protocol: instructionId must be non-empty")
	}
	b := make([]byte, 0, 64+len(f.InstructionID))
	b = append(b, `{"t":"resultAck","gen":"`...)
	b = strconv.AppendUint(b, uint64(f.Gen), 10)
	b = append(b, `","instructionId":`...)
	b, err := jsontext.AppendQuote(b, f.InstructionID)
	if err != nil {
		return nil, fmt.Errorf("protocol: instructionId: %w", err)
	}
	return append(b, '}'), nil
}

// MarshalJSON writes the ack by hand: the lane sends one per chunk, so it
// is checked field by field rather than by a round trip through the
// decoder as the rarer frames are.
func (f *ChunkAck) MarshalJSON() ([]byte, error) {
	if f.InstructionID == "" {
		return nil, fmt.Errorf("protocol: instructionId must be non-empty")
	}
	if f.UpToStreamSeq < -1 || f.UpToStreamSeq > MaxSafeInteger {
		return nil, fmt.Errorf("protocol: upToStreamSeq %d is outside -1..2^53-1", f.UpToStreamSeq)
	}
	b := make([]byte, 0, 96+len(f.InstructionID))
	b = append(b, `{"t":"chunkAck","gen":"`...)
	b = strconv.AppendUint(b, uint64(f.Gen), 10)
	b = append(b, `","instructionId":`...)
	b, err := jsontext.AppendQuote(b, f.InstructionID)
	if err != nil {
		return nil, fmt.Errorf("protocol: instructionId: %w", err)
	}
	b = append(b, `,"upToStreamSeq":`...)
	b = strconv.AppendInt(b, f.UpToStreamSeq, 10)
	return append(b, '}'), nil
}

func (f *Bye) MarshalJSON() ([]byte, error) {
	if !f.Reason.Valid() {
		return nil, &UnknownMemberError{Set: byeReasons.name, Value: string(f.Reason)}
	}
	type wire Bye
	return encodeServer(struct {
		T ServerFrameType `json:"t"`
		wire
	}{TypeBye, wire(*f)})
}

func (f *Ping) MarshalJSON() ([]byte, error) { return []byte(`{"t":"ping"}`), nil }

// MarshalJSON writes the payload by hand, like Chunk: it carries file bytes.
func (f *Payload) MarshalJSON() ([]byte, error) { return f.AppendJSON(nil) }

// AppendJSON appends the payload's wire form to b.
func (f *Payload) AppendJSON(b []byte) ([]byte, error) {
	if !f.Part.Valid() {
		return nil, &UnknownMemberError{Set: payloadParts.name, Value: string(f.Part)}
	}
	if err := checkStreamFields(f.InstructionID, f.Offset, f.TotalLen); err != nil {
		return nil, err
	}
	b = slices.Grow(b, 160+len(f.InstructionID)+b64.EncodedLen(len(f.Data)))
	b = append(b, `{"t":"payload","gen":"`...)
	b = strconv.AppendUint(b, uint64(f.Gen), 10)
	b = append(b, `","instructionId":`...)
	b, err := jsontext.AppendQuote(b, f.InstructionID)
	if err != nil {
		return nil, fmt.Errorf("protocol: instructionId: %w", err)
	}
	b = append(b, `,"part":"`...)
	b = append(b, f.Part...)
	b = append(b, '"')
	if f.Part == PartChunk {
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, f.Offset, 10)
		b = append(b, `,"dataB64":"`...)
		b = b64.AppendEncode(b, f.Data)
		b = append(b, '"')
	} else {
		b = append(b, `,"totalLen":`...)
		b = strconv.AppendInt(b, f.TotalLen, 10)
		b = append(b, `,"sha256":"`...)
		b = append(b, f.SHA256.String()...)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}
