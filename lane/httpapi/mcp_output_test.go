package httpapi

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/sema-agent/sema/lane"
)

// What an MCP tool call keeps of its output (run_command: the head and tail
// of stdout and of stderr, 2 × max_output_bytes; read_file: the content,
// max_output_bytes) is held in the buffered-content budget of the caller
// until its request ends, like any request content, so that one key's
// concurrent calls cannot take the lane's memory (four run_commands of
// 16 MiB took it to 1.9 GB). A call whose hold could never fit the
// per-identity share is refused before anything is sent, naming the bound.
func TestMCPOutputIsHeldInTheContentBudget(t *testing.T) {
	l := newTestLane(t, func(c *lane.Config) { c.MaxBufferedContent, c.MaxBufferedContentPerIdentity = 4<<20, 1<<20 })
	_, key := l.user("u")
	call := func(tool, args string) map[string]any {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
		st, b := postMCP(t, l.url+"/v1/mcp?device=dev_01J8ZQ4T9X0000000000000000", key, body)
		_, data, ok := strings.Cut(b, "data: ")
		var m struct {
			Result struct {
				Structured map[string]any `json:"structuredContent"`
			}
		}
		if !ok || json.Unmarshal([]byte(data), &m) != nil {
			t.Fatalf("%s: %d %s", tool, st, b)
		}
		return m.Result.Structured
	}
	// 2 × 1 MiB is over the 1 MiB share: refused, naming the bound.
	got := call("run_command", `{"command":"true","max_output_bytes":1048576}`)
	if got["errorCode"] != "mcp.invalid_argument" || !strings.Contains(got["message"].(string), "max_output_bytes") {
		t.Fatalf("a run_command whose output could never fit: %v", got)
	}
	got = call("read_file", `{"path":"/f","max_output_bytes":2097152}`)
	if got["errorCode"] != "mcp.invalid_argument" || !strings.Contains(got["message"].(string), "max_output_bytes") {
		t.Fatalf("a read_file whose output could never fit: %v", got)
	}
	// The default (2 × 256 KiB) fits: the call goes on to the lane, which
	// has no such device.
	if got = call("run_command", `{"command":"true"}`); got["errorCode"] != "device.not_found" {
		t.Fatalf("a run_command within the share: %v", got)
	}
	if l.budget.inUse() != 0 {
		t.Fatalf("%d bytes still held once the requests ended", l.budget.inUse())
	}
	// With 900 KiB of the caller's share held by a body still arriving,
	// the default's 512 KiB does not fit now: service.busy, nothing sent.
	host := strings.TrimPrefix(l.url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/mcp HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer "+key+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 921600\r\n\r\n{")
	eventually(t, "the stalled body's reservation", func() bool { return l.budget.inUse() == 921600 })
	if got = call("run_command", `{"command":"true"}`); got["errorCode"] != "service.busy" {
		t.Fatalf("a run_command beside a held share: %v", got)
	}
}
