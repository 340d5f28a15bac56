package protocol

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// chunkFrame64KiB is a chunk frame carrying 64 KiB of raw stdout.
func chunkFrame64KiB(b *testing.B) []byte {
	raw := make([]byte, RecommendedChunkBytes)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	c := &Chunk{Gen: 7, InstructionID: "ins_01J8ZQ4T9X7M3K5N6P8R0S2V4W", StreamSeq: 12, Kind: ChunkStdout, Data: raw}
	frame, err := c.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

// BenchmarkDecodeChunk64KiB: the lane's strict decode and validation of a
// 64 KiB stdout chunk (JSON, shape, canonical gen and base64). Throughput is
// measured over the raw stdout bytes carried.
func BenchmarkDecodeChunk64KiB(b *testing.B) {
	frame := chunkFrame64KiB(b)
	b.SetBytes(RecommendedChunkBytes)
	b.ReportAllocs()
	for b.Loop() {
		f, err := DecodeDeviceFrame(TextMessage, frame, MaxFrameBytes)
		if err != nil || len(f.(*Chunk).Data) != RecommendedChunkBytes {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodingJSONUnmarshalChunk64KiB: for scale, plain encoding/json
// unmarshalling of the same frame into a struct, with none of the checks.
func BenchmarkEncodingJSONUnmarshalChunk64KiB(b *testing.B) {
	frame := chunkFrame64KiB(b)
	type plainChunk struct {
		T             string `json:"t"`
		Gen           string `json:"gen"`
		InstructionID string `json:"instructionId"`
		StreamSeq     int64  `json:"streamSeq"`
		Kind          string `json:"kind"`
		DataB64       []byte `json:"dataB64"`
		ExitCode      *int   `json:"exitCode"`
	}
	b.SetBytes(RecommendedChunkBytes)
	b.ReportAllocs()
	for b.Loop() {
		var c plainChunk
		if err := json.Unmarshal(frame, &c); err != nil || len(c.DataB64) != RecommendedChunkBytes {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeChunk64KiB: the executor's side, encoding the same chunk
// into a reused buffer.
func BenchmarkEncodeChunk64KiB(b *testing.B) {
	frame := chunkFrame64KiB(b)
	f, err := DecodeDeviceFrame(TextMessage, frame, MaxFrameBytes)
	if err != nil {
		b.Fatal(err)
	}
	c := f.(*Chunk)
	buf := make([]byte, 0, len(frame))
	b.SetBytes(RecommendedChunkBytes)
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = c.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
