package protocol

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sema-agent/sema/internal/b64"
)

// DeviceFrame is a device→server frame (§2.2): *Hello, *GenerationAck,
// *Heartbeat, *Result, *Chunk or *Goodbye. Each marshals to exactly its wire
// form, t first.
type DeviceFrame interface {
	Type() DeviceFrameType
	// MarshalJSON returns exactly the wire form.
	MarshalJSON() ([]byte, error)
	isDeviceFrame()
}

// Hello is the first frame on a socket, once per socket.
type Hello struct {
	ProtocolVersion int    `json:"protocolVersion"`
	DeviceID        string `json:"deviceId"`
	// Epoch is a fresh ULID per executor process start.
	Epoch         string   `json:"epoch"`
	SignatureB64  string   `json:"signatureB64"`
	Platform      Platform `json:"platform"`
	WorkspaceRoot string   `json:"workspaceRoot"`
	PathFlavor    string   `json:"pathFlavor"`
	// Supports may name kinds this package does not know; the server ignores
	// them (§3.2).
	Supports []InstructionKind `json:"supports"`
	Resuming *Resuming         `json:"resuming,omitzero"`
}

// Platform describes the executor in hello.
type Platform struct {
	OS              string `json:"os"`
	Arch            string `json:"arch"`
	ExecutorVersion string `json:"executorVersion"`
}

// Resuming is informational (§8).
type Resuming struct {
	UnackedResults int64 `json:"unackedResults"`
}

// GenerationAck is sent once, after fencing older generations (§1.5).
type GenerationAck struct {
	Gen Gen `json:"gen"`
}

// Heartbeat keeps a quiet connection alive (R14).
type Heartbeat struct {
	Gen      Gen      `json:"gen"`
	Seq      int64    `json:"seq"`
	Inflight []string `json:"inflight"`
}

// Result is the single terminal answer for one instruction.
type Result struct {
	Gen           Gen     `json:"gen"`
	InstructionID string  `json:"instructionId"`
	DeviceSeq     int64   `json:"deviceSeq"`
	Outcome       Outcome `json:"outcome"`
}

// Chunk is one piece of an instruction's output stream (§4). Kind decides the
// wire fields: stdout, stderr and data carry Data as dataB64 (an empty Data
// is sent as ""); exit carries ExitCode. The other field is never sent.
type Chunk struct {
	Gen           Gen
	InstructionID string
	StreamSeq     int64
	Kind          ChunkKind
	Data          []byte
	ExitCode      int
	// DataB64, when not nil, is Data's canonical base64 (§4 Encoding) — the
	// one spelling there is, so the device's dataB64 as it was sent, unless
	// that had JSON escapes. DecodeDeviceFrame fills it for stdout, stderr
	// and data chunks (not aliasing the frame), so that the lane passes
	// output on without encoding it again. The encoders ignore it.
	DataB64 []byte

	pooled *chunkBuf // the memory of Data and DataB64, if pooled (Release)
}

// Release gives the memory of Data and DataB64 back for reuse by later
// decodes, and clears both. Nothing may use them afterwards — the one
// holder of a decoded chunk calls it once it has copied what it needs (the
// lane, once a chunk's line is written); a copy of the chunk value shares
// the memory. Releasing is optional: memory never released is collected
// as garbage.
func (f *Chunk) Release() {
	p := f.pooled
	f.pooled, f.Data, f.DataB64 = nil, nil, nil
	p.release()
}

// Goodbye announces a graceful shutdown (R15). GraceMs is absent when nil.
type Goodbye struct {
	Gen     Gen           `json:"gen"`
	Reason  GoodbyeReason `json:"reason"`
	GraceMs *int64        `json:"graceMs,omitzero"`
}

func (*Hello) Type() DeviceFrameType         { return TypeHello }
func (*GenerationAck) Type() DeviceFrameType { return TypeGenerationAck }
func (*Heartbeat) Type() DeviceFrameType     { return TypeHeartbeat }
func (*Result) Type() DeviceFrameType        { return TypeResult }
func (*Chunk) Type() DeviceFrameType         { return TypeChunk }
func (*Goodbye) Type() DeviceFrameType       { return TypeGoodbye }

func (*Hello) isDeviceFrame()         {}
func (*GenerationAck) isDeviceFrame() {}
func (*Heartbeat) isDeviceFrame()     {}
func (*Result) isDeviceFrame()        {}
func (*Chunk) isDeviceFrame()         {}
func (*Goodbye) isDeviceFrame()       {}

func (f *Hello) MarshalJSON() ([]byte, error) {
	type wire Hello
	w := wire(*f)
	if w.Supports == nil {
		w.Supports = []InstructionKind{}
	}
	return encodeDevice(struct {
		T DeviceFrameType `json:"t"`
		wire
	}{TypeHello, w}, MaxPreAuthFrameBytes)
}

func (f *GenerationAck) MarshalJSON() ([]byte, error) {
	type wire GenerationAck
	return encodeDevice(struct {
		T DeviceFrameType `json:"t"`
		wire
	}{TypeGenerationAck, wire(*f)}, MaxFrameBytes)
}

func (f *Heartbeat) MarshalJSON() ([]byte, error) {
	type wire Heartbeat
	w := wire(*f)
	if w.Inflight == nil {
		w.Inflight = []string{}
	}
	return encodeDevice(struct {
		T DeviceFrameType `json:"t"`
		wire
	}{TypeHeartbeat, w}, MaxFrameBytes)
}

func (f *Result) MarshalJSON() ([]byte, error) {
	if f.Outcome == nil {
		return nil, fmt.Errorf("protocol: result for %q has no outcome", f.InstructionID)
	}
	type wire Result
	return encodeDevice(struct {
		T DeviceFrameType `json:"t"`
		wire
	}{TypeResult, wire(*f)}, MaxFrameBytes)
}

func (f *Goodbye) MarshalJSON() ([]byte, error) {
	if !f.Reason.Valid() {
		return nil, &UnknownMemberError{Set: goodbyeReasons.name, Value: string(f.Reason)}
	}
	type wire Goodbye
	return encodeDevice(struct {
		T DeviceFrameType `json:"t"`
		wire
	}{TypeGoodbye, wire(*f)}, MaxFrameBytes)
}

// MarshalJSON writes the chunk by hand: it is the hot path of every stream,
// and the data goes straight into the frame as canonical base64.
func (f *Chunk) MarshalJSON() ([]byte, error) {
	return f.AppendJSON(nil)
}

// AppendJSON appends the chunk's wire form to b.
func (f *Chunk) AppendJSON(b []byte) ([]byte, error) {
	if !f.Kind.Valid() {
		return nil, &UnknownMemberError{Set: chunkKinds.name, Value: string(f.Kind)}
	}
	if f.Kind == ChunkExit && len(f.Data) > 0 {
		return nil, fmt.Errorf("protocol: an exit chunk must not carry data")
	}
	if err := checkStreamFields(f.InstructionID, f.StreamSeq); err != nil {
		return nil, err
	}
	if int64(f.ExitCode) < -MaxSafeInteger || int64(f.ExitCode) > MaxSafeInteger {
		return nil, fmt.Errorf("protocol: exitCode %d is not a safe integer", f.ExitCode)
	}
	b = slices.Grow(b, 128+len(f.InstructionID)+b64.EncodedLen(len(f.Data)))
	b = append(b, `{"t":"chunk","gen":"`...)
	b = strconv.AppendUint(b, uint64(f.Gen), 10)
	b = append(b, `","instructionId":`...)
	b, err := jsontext.AppendQuote(b, f.InstructionID)
	if err != nil {
		return nil, fmt.Errorf("protocol: instructionId: %w", err)
	}
	b = append(b, `,"streamSeq":`...)
	b = strconv.AppendInt(b, f.StreamSeq, 10)
	b = append(b, `,"kind":"`...)
	b = append(b, f.Kind...)
	if f.Kind == ChunkExit {
		b = append(b, `","exitCode":`...)
		b = strconv.AppendInt(b, int64(f.ExitCode), 10)
	} else {
		b = append(b, `","dataB64":"`...)
		b = b64.AppendEncode(b, f.Data)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// encodeDevice marshals a frame's wire struct and holds the bytes to the
// lane's own decoder, so this package never emits a frame the lane would
// refuse (an over-size, out-of-range or mis-shaped frame costs the stream,
// §2.4). Hello is held to the pre-auth cap it must fit (§2.1).
func encodeDevice(v any, limit int) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	if _, err := DecodeDeviceFrame(TextMessage, b, limit); err != nil {
		return nil, fmt.Errorf("protocol: refusing to encode a frame the lane would refuse: %w", err)
	}
	return b, nil
}

// checkStreamFields holds the hand-written Chunk and Payload encoders to
// the decoders' rules for their fields.
func checkStreamFields(instructionID string, nums ...int64) error {
	if instructionID == "" {
		return fmt.Errorf("protocol: instructionId must be non-empty")
	}
	for _, n := range nums {
		if n < 0 || n > MaxSafeInteger {
			return fmt.Errorf("protocol: %d is not a non-negative safe integer", n)
		}
	}
	return nil
}
