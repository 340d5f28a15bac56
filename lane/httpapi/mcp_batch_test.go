package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// /v1/mcp takes one MCP message per request: a JSON-RPC batch (an array,
// which MCP no longer has since its 2025-06-18 revision) is refused 400
// before any of it is handled. A batch's tool calls ran all at once, inside
// one request: 20,000 of them in a 2.5 MB body took the lane to 2.2 GB.
func TestMCPRefusesAJSONRPCBatch(t *testing.T) {
	l := newTestLane(t)
	_, key := l.user("u")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices","arguments":{}}}`
	post := func(body string) (int, string) { return postMCP(t, l.url+"/v1/mcp", key, body) }
	for _, batch := range []string{"[" + call + "," + call + "]", " \r\n\t[" + call + "]", "[]"} {
		st, body := post(batch)
		if st != http.StatusBadRequest || !strings.Contains(body, `"errorCode":"request.body_shape"`) || !strings.Contains(body, "batch") {
			t.Fatalf("a batch %.20q: %d %s", batch, st, body)
		}
	}
	if st, body := post(call); st != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("one message: %d %s", st, body)
	}
}

// postMCP posts one MCP message to url with key, as a Streamable HTTP
// client does, and returns the status and the body.
func postMCP(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
