package mcp_test

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// The cost of each face over the lane's own HTTP API, for `exec true`:
// go test -run '^$' -bench RoundTrip ./mcp
func BenchmarkRoundTrip(b *testing.B) {
	l := startLiveLane(b)
	b.Run("http-api", func(b *testing.B) {
		lc, _ := client.New(l.url, l.apiKey)
		defer lc.Close()
		in := api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "true"}, TimeoutMs: 10000}
		for b.Loop() {
			if res, err := lc.Instruct(b.Context(), l.deviceID, in, client.Sink{}); err != nil || !res.Outcome.OK {
				b.Fatal(err, res)
			}
		}
	})
	for _, f := range faces {
		b.Run("mcp-"+f.name, func(b *testing.B) {
			lb := *l
			lb.t = b
			cs := f.connect(&lb, l.deviceID, "", nil)
			params := &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "true"}}
			for b.Loop() {
				if res, err := cs.CallTool(b.Context(), params); err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}
