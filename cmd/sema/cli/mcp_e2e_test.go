package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/mcp"
)

// mcpStdio starts a real `sema mcp` with args, as an MCP client on the same
// machine would, and connects the Go SDK's client to it over its stdio.
func mcpStdio(t *testing.T, s *laneServer, args ...string) (*sdk.ClientSession, *syncBuffer) {
	return mcpStdioEnv(t, s, nil, args...)
}

// mcpStdioEnv is mcpStdio with more environment (a later entry wins).
func mcpStdioEnv(t *testing.T, s *laneServer, env []string, args ...string) (*sdk.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(semaBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(append(os.Environ(), s.env(t)...), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "v0"}, nil)
	cs, err := c.Connect(ctx(t), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to sema mcp: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// mcpHTTP connects the Go SDK's client to the real server's /v1/mcp.
func mcpHTTP(t *testing.T, s *laneServer, key, query string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "v0"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: s.url + "/v1/mcp" + query, HTTPClient: &http.Client{Transport: withKey{key}}}
	cs, err := c.Connect(ctx(t), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

type withKey struct{ key string }

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: %v", name, b, err)
		}
	}
	return res
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The binaries end to end: a real `sema server`, a real `sema device
// serve`, and the two faces — a real `sema mcp` on stdio and the server's
// /v1/mcp — driven by the official Go SDK's client.
func TestMCPWithTheRealBinaries(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	_, deviceID, _ := enrollAndServe(t, s, ws)
	stdio, stderr := mcpStdio(t, s)
	web, err := mcpHTTP(t, s, s.key, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*sdk.ClientSession{"stdio": stdio, "http": web} {
		t.Run(name, func(t *testing.T) {
			tools, err := cs.ListTools(ctx(t), nil)
			if err != nil || len(tools.Tools) != 6 {
				t.Fatalf("tools: %v %d", err, len(tools.Tools))
			}
			var r mcp.RunResult
			callTool(t, cs, "run_command", map[string]any{"command": "echo hello from $(basename $0)"}, &r)
			if r.ExitCode != 0 || r.Stdout != "hello from sh\n" || r.DeviceID != deviceID {
				t.Fatalf("run_command %+v", r)
			}

			var w mcp.WriteResult
			if res := callTool(t, cs, "write_file", map[string]any{"path": name + "/a.txt", "content": "written by " + name}, &w); res.IsError {
				t.Fatalf("write_file: %s", toolText(res))
			}
			if b, err := os.ReadFile(filepath.Join(ws, name, "a.txt")); err != nil || string(b) != "written by "+name {
				t.Fatalf("on disk %q %v", b, err)
			}
			var rd mcp.ReadResult
			callTool(t, cs, "read_file", map[string]any{"path": name + "/a.txt"}, &rd)
			if rd.Content != "written by "+name {
				t.Fatalf("read_file %+v", rd)
			}

			// 5 MB of output: explicitly cut, never silently.
			callTool(t, cs, "run_command", map[string]any{"command": "head -c 5000000 /dev/zero"}, &r)
			if r.StdoutBytes != 5_000_000 || r.StdoutOmitted < 5_000_000-mcp.DefaultMaxOutput ||
				!strings.Contains(r.Stdout, fmt.Sprintf("[… %d bytes of stdout left out: 5000000 in all …]", r.StdoutOmitted)) {
				t.Fatalf("5 MB: bytes %d omitted %d", r.StdoutBytes, r.StdoutOmitted)
			}

			var f mcp.Failure
			res := callTool(t, cs, "run_command", map[string]any{"command": "sleep 30", "timeout_ms": 200}, &f)
			if !res.IsError || f.ErrorCode != "timeout" {
				t.Fatalf("timeout: %s", toolText(res))
			}
		})
	}
	if strings.Contains(stderr.String(), s.key) {
		t.Error("sema mcp logged the API key")
	}
}

// An unknown API key is refused at the door of /v1/mcp.
func TestMCPOverHTTPRefusesAnUnknownKey(t *testing.T) {
	s := startServer(t, t.TempDir())
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, s.url+"/v1/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer sema_not-a-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The MCP authorization spec's answer: 401 with a Bearer challenge.
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"auth.unauthorized"`) ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	if _, err := mcpHTTP(t, s, "sema_not-a-key", ""); err == nil {
		t.Fatal("the SDK's client connected with an unknown key")
	}
}

// A person denies the command on the approval device (the simulator): the
// tool result is an error that says it was denied there, and nothing ran.
func TestMCPApprovalDenialSaysItWasDeniedOnTheDevice(t *testing.T) {
	sim, sock, _ := startSimInShortDir(t)
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws, "--approve", "unix:"+sock)
	sim.out.waitFor(ctx(t), t, "host connected")
	cs, _ := mcpStdio(t, s)
	marker := filepath.Join(ws, "ran")
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "touch " + marker}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	sim.out.waitFor(ctx(t), t, "pending r1: Run: touch "+marker)
	io.WriteString(sim.keys, "d\n")
	res := <-done
	if res == nil {
		t.FailNow()
	}
	text := toolText(res)
	if !res.IsError || !strings.HasPrefix(text, "permission_denied: ") || !strings.Contains(text, "denied on unix:"+sock) {
		t.Fatalf("denial: %s", text)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("a denied command ran")
	}
}

// An API key of its own drives both faces; revoked, it is refused at once
// by both: the stdio server's next call and the next HTTP request.
func TestMCPRefusesARevokedKeyAtOnce(t *testing.T) {
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())
	out, errOut, code := s.sema(t, nil, "apikey", "create", "--json")
	var k struct{ KeyID, APIKey string }
	if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil || k.APIKey == "" {
		t.Fatalf("apikey create: exit %d %v: %s %s", code, err, out, errOut)
	}
	stdio, _ := mcpStdioEnv(t, s, []string{cli.EnvAPIKey + "=" + k.APIKey})
	web, err := mcpHTTP(t, s, k.APIKey, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*sdk.ClientSession{"stdio": stdio, "http": web} {
		if res := callTool(t, cs, "run_command", map[string]any{"command": "true"}, nil); res.IsError {
			t.Fatalf("%s with the new key: %s", name, toolText(res))
		}
	}
	if _, errOut, code := s.sema(t, nil, "apikey", "revoke", k.KeyID); code != 0 {
		t.Fatalf("apikey revoke: exit %d: %s", code, errOut)
	}
	var f mcp.Failure
	if res := callTool(t, stdio, "run_command", map[string]any{"command": "true"}, &f); !res.IsError || f.ErrorCode != "auth.forbidden" {
		t.Fatalf("stdio after the revoke: %s", toolText(res))
	}
	if _, err := web.CallTool(ctx(t), &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "true"}}); err == nil {
		t.Fatal("/v1/mcp answered a call with a revoked key")
	}
	if _, err := mcpHTTP(t, s, k.APIKey, ""); err == nil {
		t.Fatal("/v1/mcp let a revoked key connect")
	}
}

// §9 through MCP: a session bound to one device by its first call refuses
// another device, on both faces, and nothing runs there.
func TestMCPSessionRefusesASecondDevice(t *testing.T) {
	s := startServer(t, t.TempDir())
	wsA, wsB := t.TempDir(), t.TempDir()
	_, devA, _ := enrollAndServe(t, s, wsA)
	_, devB, _ := enrollAndServe(t, s, wsB)
	first, _ := mcpStdio(t, s, "--device", devA, "--session", "ses_shared")
	if res := callTool(t, first, "run_command", map[string]any{"command": "true"}, nil); res.IsError {
		t.Fatalf("the first call: %s", toolText(res))
	}
	other, _ := mcpStdio(t, s, "--device", devB, "--session", "ses_shared")
	web, err := mcpHTTP(t, s, s.key, "?device="+devB+"&session=ses_shared")
	if err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*sdk.ClientSession{"stdio": other, "http": web} {
		var f mcp.Failure
		res := callTool(t, cs, "run_command", map[string]any{"command": "touch ran-" + name}, &f)
		if !res.IsError || f.ErrorCode != "session.device_mismatch" || !strings.Contains(f.Message, devA) {
			t.Fatalf("%s: %s", name, toolText(res))
		}
		if _, err := os.Stat(filepath.Join(wsB, "ran-"+name)); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused command ran on the second device", name)
		}
	}
	// A session of its own on the second device works.
	if res := callTool(t, mcpStdioOnly(t, s, devB), "run_command", map[string]any{"command": "true"}, nil); res.IsError {
		t.Fatalf("a new session on the second device: %s", toolText(res))
	}
}

func mcpStdioOnly(t *testing.T, s *laneServer, device string) *sdk.ClientSession {
	cs, _ := mcpStdio(t, s, "--device", device)
	return cs
}

// A client that writes its calls and closes its end, as `printf … | sema
// mcp` does, gets every answer before sema mcp exits: the end of the
// input does not cancel the calls still running.
func TestMCPStdioAnswersEveryCallReadBeforeItsInputEnded(t *testing.T) {
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())
	script := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"printf","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo one"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 0.3; echo two"}}}`,
	}, "\n") + "\n"
	cmd := exec.Command(semaBin, "mcp")
	cmd.Env = append(os.Environ(), s.env(t)...)
	cmd.Stdin = strings.NewReader(script)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sema mcp: %v\n%s", err, stderr)
	}
	answers := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m.Error != nil {
			t.Fatalf("call %d failed: %s", m.ID, m.Error)
		}
		answers[m.ID] = string(m.Result)
	}
	for id, want := range map[int]string{2: `one\n`, 3: `two\n`} {
		if !strings.Contains(answers[id], want) || strings.Contains(answers[id], `"isError":true`) {
			t.Errorf("call %d: %q, want its output %q\nstdout: %s\nstderr: %s", id, answers[id], want, out, stderr)
		}
	}
}
