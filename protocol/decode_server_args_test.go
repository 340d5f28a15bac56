package protocol

import (
	"strings"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	a, err := DecodeArgs(KindExec, []byte(`{"command":"ls","extra":1}`))
	if err != nil || a != (CommandArgs{Command: "ls"}) {
		t.Fatalf("DecodeArgs(exec) = %#v, %v", a, err)
	}
	for _, tt := range []struct {
		kind  InstructionKind
		raw   string
		field string
	}{
		{KindExists, `{"path":"a"}`, "args.path"},
		{KindExec, `{}`, "args.command"},
		{KindWriteFile, `{"path":"/a","contentLen":1}`, "args.sha256"},
		{KindExec, `[]`, "args"},
		{"teleport", `{}`, "teleport"},
	} {
		if _, err := DecodeArgs(tt.kind, []byte(tt.raw)); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("DecodeArgs(%s, %s) = %v, want an error naming %s", tt.kind, tt.raw, err, tt.field)
		}
	}
}
