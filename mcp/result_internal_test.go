package mcp

import (
	"io"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// A tool call whose instruction may have run says so (outcome_unknown,
// mayHaveRun), never "nothing was sent": a replica that failed after a
// forwarded request reached it, or a connection that broke after the
// request was sent. A refusal still says nothing was sent.
func TestACallThatMayHaveRunSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		may  bool
	}{
		{"outcome_unknown from the holder", &client.Error{Status: 502, Code: api.CodeOutcomeUnknown, Message: "the replica failed"}, true},
		{"broken after sending", &client.UnreachableError{URL: "u", Err: io.ErrUnexpectedEOF, Sent: true}, true},
		{"a refusal", &client.Error{Status: 503, Code: api.CodeUnavailable, Message: "nothing was dispatched"}, false},
	} {
		res := callFailed(t.Context(), "dev_1", tc.err)
		f := res.StructuredContent.(Failure)
		text := res.Content[0].(*sdk.TextContent).Text
		switch {
		case !res.IsError || f.MayHaveRun != tc.may:
			t.Errorf("%s: %+v; want mayHaveRun %v", tc.name, f, tc.may)
		case tc.may && (f.ErrorCode != string(protocol.ErrOutcomeUnknown) || strings.Contains(text, "nothing was sent")):
			t.Errorf("%s: %q; want outcome_unknown, not 'nothing was sent'", tc.name, text)
		}
	}
}
