package protocol

import (
	"encoding/hex"
	"strings"
	"testing"
)

// §1.3 "Importable source of truth and a fixed test vector": the payload must
// be reproduced byte for byte.
func TestHelloSignaturePayloadMatchesSpecVectorByteForByte(t *testing.T) {
	const want = "73656d612e6465766963652e68656c6c6f2e763100000018626d3975593255746447567a644331325a574e306233493d0000001e6465765f30314a385a51345439583030303030303030303030303030303001923f72693d3d0732d4d64601916c9c00000001"
	got, err := HelloSignaturePayload("bm9uY2UtdGVzdC12ZWN0b3I=", "dev_01J8ZQ4T9X0000000000000000", "01J8ZQ4T9X7M3K5N6P8R0S2V4W", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 102 {
		t.Errorf("payload is %d bytes, the spec's vector is 102", len(got))
	}
	if hex.EncodeToString(got) != want {
		t.Errorf("payload\n got %x\nwant %s", got, want)
	}
}

func TestHelloSignaturePayloadLengthPrefixesCountBytesNotCharacters(t *testing.T) {
	got, err := HelloSignaturePayload("é", "dev_ü", "01J8ZQ4T9X7M3K5N6P8R0S2V4W", 1)
	if err != nil {
		t.Fatal(err)
	}
	rest := got[len(HelloDomainTag):]
	if hex.EncodeToString(rest[:6]) != "00000002c3a9" {
		t.Errorf("nonce prefix and bytes = %x, want 00000002c3a9", rest[:6])
	}
	if hex.EncodeToString(rest[6:10]) != "00000006" {
		t.Errorf("deviceId prefix = %x, want 00000006 (6 UTF-8 bytes)", rest[6:10])
	}
}

// §1.3 "epoch is a byte-exact key: exactly which strings are accepted".
func TestEpochTable(t *testing.T) {
	valid := "01J8ZQ4T9X7M3K5N6P8R0S2V4W"
	tests := []struct {
		name  string
		epoch string
		ok    bool
	}{
		{"valid", valid, true},
		{"lower case", strings.ToLower(valid), false},
		{"one lower-case letter", "01j8ZQ4T9X7M3K5N6P8R0S2V4W", false},
		{"first character 8 overflows", "8" + valid[1:], false},
		{"first character 9 overflows", "9" + valid[1:], false},
		{"first character A overflows", "A" + valid[1:], false},
		{"first character Z overflows", "Z" + valid[1:], false},
		{"first character 7 is the largest", "7" + valid[1:], true},
		{"25 characters", valid[:25], false},
		{"27 characters", valid + "0", false},
		{"empty", "", false},
		{"excluded letter I", valid[:5] + "I" + valid[6:], false},
		{"excluded letter L", valid[:5] + "L" + valid[6:], false},
		{"excluded letter O", valid[:5] + "O" + valid[6:], false},
		{"excluded letter U", valid[:5] + "U" + valid[6:], false},
		{"Z last is the value 31", valid[:25] + "Z", true},
		{"Z first is an overflow", "Z" + valid[1:25] + "0", false},
		{"max value", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", true},
		{"non-ASCII", "01J8ZQ4T9X7M3K5N6P8R0S2V4é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok := DecodeULID16(tt.epoch)
			if ok != tt.ok {
				t.Errorf("DecodeULID16(%q) ok = %v, want %v", tt.epoch, ok, tt.ok)
			}
			_, err := HelloSignaturePayload("n", "dev_x", tt.epoch, 1)
			if (err == nil) != tt.ok {
				t.Errorf("HelloSignaturePayload(epoch %q) err = %v, want ok=%v", tt.epoch, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "epoch must be a 26-char Crockford ULID") {
				t.Errorf("error %q does not name the epoch rule", err)
			}
		})
	}
}

func TestDecodeULID16Values(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"00000000000000000000000000", "00000000000000000000000000000000"},
		{"0000000000000000000000000Z", "0000000000000000000000000000001f"},
		{"7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "ffffffffffffffffffffffffffffffff"},
		{"01J8ZQ4T9X7M3K5N6P8R0S2V4W", "01923f72693d3d0732d4d64601916c9c"},
	}
	for _, tt := range tests {
		got, ok := DecodeULID16(tt.in)
		if !ok || hex.EncodeToString(got[:]) != tt.want {
			t.Errorf("DecodeULID16(%q) = %x, %v; want %s", tt.in, got, ok, tt.want)
		}
	}
}
