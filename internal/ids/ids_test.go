package ids

import (
	"strings"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

func TestNewIsPrefixedStrictUpperCaseULID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New(Device)
		if !strings.HasPrefix(id, Device) || !protocol.ValidULID(strings.TrimPrefix(id, Device)) {
			t.Fatalf("%q is not dev_ followed by a strict ULID", id)
		}
		if seen[id] {
			t.Fatalf("%q minted twice", id)
		}
		seen[id] = true
	}
}
