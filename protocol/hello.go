package protocol

import (
	"encoding/binary"
	"fmt"
)

// HelloSignaturePayload builds the exact bytes a device signs for hello (§1.3):
//
//	"sema.device.hello.v1"            the domain tag, no length prefix
//	‖ u32be(len(nonce)) ‖ nonce       the nonce as received, not base64-decoded
//	‖ u32be(len(deviceId)) ‖ deviceId
//	‖ epoch16                         the epoch ULID decoded to 16 bytes
//	‖ u32be(protocolVersion)
//
// Lengths are byte lengths. It fails when epoch is not a strict ULID, or a
// field does not fit a u32 length or value.
func HelloSignaturePayload(nonce, deviceID, epoch string, protocolVersion int) ([]byte, error) {
	epoch16, ok := DecodeULID16(epoch)
	if !ok {
		return nil, fmt.Errorf("device-ws: epoch must be a 26-char Crockford ULID (got %q)", epoch)
	}
	if protocolVersion < 0 || uint64(protocolVersion) > 1<<32-1 {
		return nil, fmt.Errorf("device-ws: protocolVersion %d does not fit a u32", protocolVersion)
	}
	if uint64(len(nonce)) > 1<<32-1 || uint64(len(deviceID)) > 1<<32-1 {
		return nil, fmt.Errorf("device-ws: nonce or deviceId longer than a u32 length prefix")
	}
	b := make([]byte, 0, len(HelloDomainTag)+4+len(nonce)+4+len(deviceID)+16+4)
	b = append(b, HelloDomainTag...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(nonce)))
	b = append(b, nonce...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(deviceID)))
	b = append(b, deviceID...)
	b = append(b, epoch16[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(protocolVersion))
	return b, nil
}
