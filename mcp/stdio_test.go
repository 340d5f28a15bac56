package mcp

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("the client is gone") }

// The end of the input waits for answers only while they can be written:
// with the client's end of stdout gone, the server ends instead of waiting
// for ever, though a call (the ping) may never be answered.
func TestStdioEndsWhenAnswersCannotBeWritten(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")
	srv := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	err := srv.Run(context.Background(), Stdio(in, failingWriter{}))
	if err == nil || !strings.Contains(err.Error(), "the client is gone") {
		t.Fatalf("Run: %v, want the write's error", err)
	}
}
