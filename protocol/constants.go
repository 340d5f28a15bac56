package protocol

import "time"

// DEVICE_CONSTANTS (§2.1).
const (
	// WSPath is the upgrade path; clients prefer the wsPath of /v1/capabilities.
	WSPath = "/v1/device/ws"
	// ProtocolVersion is the version this package speaks.
	//
	// History:
	//   1: the first version.
	ProtocolVersion = 1
	// MinProtocolVersion is the lowest version accepted; below it a loud
	// helloReject, never a silent downgrade.
	MinProtocolVersion = 1
	// HelloDomainTag prefixes the hello signature payload (§1.3).
	HelloDomainTag = "sema.device.hello.v1"
)

// DEVICE_WS_LIMITS (§2.1).
const (
	// MaxFrameBytes caps any single frame; it is also the transport cap.
	MaxFrameBytes = 1 << 20
	// MaxPreAuthFrameBytes caps every frame before the handshake completes,
	// measured after reassembly.
	MaxPreAuthFrameBytes = 4096
	// HandshakeDeadline runs from socket open to helloAck or helloReject.
	HandshakeDeadline = 5000 * time.Millisecond
	// DefaultPayloadPartBytes is the slice size of payload down-chunks.
	DefaultPayloadPartBytes = 262144
)

// MaxSafeInteger is the largest integer every numeric field may carry
// (JavaScript's Number.MAX_SAFE_INTEGER, 2^53−1): §2.2 "safe integers".
const MaxSafeInteger = 1<<53 - 1

// Defaults the spec names for the lane; a deployment may configure them.
const (
	DefaultHeartbeatInterval = 15 * time.Second  // §1.5
	DefaultMaxInflight       = 4                 // §1.5
	DefaultReconnectGrace    = 120 * time.Second // §1.6, R4
	DefaultLeaseTTL          = 45 * time.Second  // §1.4
	DefaultGapTimeout        = 30 * time.Second  // §4, R8
	DefaultCancelGrace       = 10 * time.Second  // R11
	DefaultExecutionGrace    = 30 * time.Second  // R12
	DefaultTokenTTL          = 900 * time.Second // §1.1
	SettledMemoSize          = 512               // §2.4, R5
	ReorderBufferEntries     = 64                // §4, R8
	ReorderBufferBytes       = 2 << 20           // §4, R8 (decoded bytes)
	// RecommendedChunkBytes is the §4 "good default" for raw bytes per chunk.
	RecommendedChunkBytes = 64 << 10
)
