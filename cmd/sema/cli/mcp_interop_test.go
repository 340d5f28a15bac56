package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// interopDir holds the TypeScript SDK's client (make interop-deps installs
// its node_modules).
var interopDir = filepath.Join("..", "..", "..", "e2e", "mcpinterop")

// tsSeen is what e2e/mcpinterop/client.mjs prints.
type tsSeen struct {
	Face   string `json:"face"`
	Server struct{ Name string }
	Tools  []struct {
		Name        string
		Annotations struct {
			ReadOnlyHint    bool
			DestructiveHint *bool
		}
	}
	Progress []string
	Run      struct {
		IsError    bool
		Structured struct {
			ExitCode int
			Stdout   string
			Stderr   string
		}
	}
	Write struct {
		IsError    bool
		Structured struct {
			CanonicalPath string
			SHA256        string
		}
	}
	Read struct {
		IsError    bool
		Structured struct{ Content string }
	}
	Missing struct {
		IsError bool
		Text    string
	}
	CancelledPid int
	Cancelled    string
}

// An MCP client no one here wrote — the official TypeScript SDK's — uses a
// device through both faces: a real `sema mcp` on stdio and the real
// server's /v1/mcp on Streamable HTTP.
func TestTheTypeScriptSDKClientUsesBothFaces(t *testing.T) {
	if _, err := os.Stat(filepath.Join(interopDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if os.Getenv("SEMA_REQUIRE_INTEROP") != "" {
			t.Fatalf("the TypeScript SDK is not installed (make interop-deps): %v", err)
		}
		t.Skip("the TypeScript SDK is not installed: make interop-deps")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	enrollAndServe(t, s, ws)
	for _, face := range []struct{ name, target string }{{"stdio", semaBin}, {"http", s.url + "/v1/mcp"}} {
		t.Run(face.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx(t), node, "client.mjs", face.name, face.target)
			cmd.Dir = interopDir
			cmd.Env = append(os.Environ(), append(s.env(t), "SEMA_INTEROP_WS="+ws)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node client.mjs %s: %v\n%s", face.name, err, stderr.String())
			}
			var seen tsSeen
			if err := json.Unmarshal(out, &seen); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			var names []string
			for _, tool := range seen.Tools {
				names = append(names, tool.Name)
				destructive := tool.Annotations.DestructiveHint != nil && *tool.Annotations.DestructiveHint
				if (tool.Name == "run_command" || tool.Name == "write_file") != destructive {
					t.Errorf("%s: destructiveHint %v", tool.Name, destructive)
				}
			}
			if !slices.Equal(names, []string{"file_info", "list_devices", "list_directory", "read_file", "run_command", "write_file"}) || seen.Server.Name != "sema" {
				t.Fatalf("tools %v of %q", names, seen.Server.Name)
			}
			if r := seen.Run; r.IsError || r.Structured.ExitCode != 4 || r.Structured.Stdout != "hello-from-ts\n" || r.Structured.Stderr != "oops\n" {
				t.Fatalf("run_command %+v", r)
			}
			if !slices.Contains(seen.Progress, "hello-from-ts\n") {
				t.Errorf("no live output in the progress notifications: %q", seen.Progress)
			}
			want := filepath.Join(ws, "ts-"+face.name+".txt")
			if b, err := os.ReadFile(want); err != nil || string(b) != "from the TypeScript SDK\n" || seen.Write.Structured.CanonicalPath != want {
				t.Fatalf("write_file %+v; on disk %q %v", seen.Write, b, err)
			}
			if seen.Read.IsError || seen.Read.Structured.Content != "from the TypeScript SDK\n" {
				t.Fatalf("read_file %+v", seen.Read)
			}
			if !seen.Missing.IsError || !strings.HasPrefix(seen.Missing.Text, "not_found: ") {
				t.Fatalf("a missing file %+v", seen.Missing)
			}
			// The aborted call: its command does not outlive it.
			if !strings.HasPrefix(seen.Cancelled, "rejected: ") || seen.CancelledPid <= 0 {
				t.Fatalf("the aborted call: %q, pid %d", seen.Cancelled, seen.CancelledPid)
			}
			waitFor(t, "the aborted call's command to be killed", func() bool { return syscall.Kill(seen.CancelledPid, 0) != nil })
		})
	}
}

// The MCP Inspector's CLI lists the tools and runs a command through both
// faces, as a developer trying the lane would.
func TestTheMCPInspectorUsesBothFaces(t *testing.T) {
	inspector := filepath.Join(interopDir, "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(inspector); err != nil {
		if os.Getenv("SEMA_REQUIRE_INTEROP") != "" {
			t.Fatalf("the MCP Inspector is not installed (make interop-deps): %v", err)
		}
		t.Skip("the MCP Inspector is not installed: make interop-deps")
	}
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())
	faces := map[string][]string{
		"stdio": {"-e", cli.EnvServer + "=" + s.url, "-e", cli.EnvAPIKey + "=" + s.key, semaBin, "mcp"},
		"http":  {s.url + "/v1/mcp", "--transport", "http", "--header", "Authorization: Bearer " + s.key},
	}
	for name, target := range faces {
		t.Run(name, func(t *testing.T) {
			inspect := func(method ...string) map[string]any {
				args := append(append([]string{"--cli"}, target...), method...)
				cmd := exec.CommandContext(ctx(t), inspector, args...)
				cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
				out, err := cmd.Output()
				var got map[string]any
				if err == nil {
					err = json.Unmarshal(out, &got)
				}
				if err != nil {
					t.Fatalf("mcp-inspector %v: %v\n%s", method, err, out)
				}
				return got
			}
			tools, _ := inspect("--method", "tools/list")["tools"].([]any)
			if len(tools) != 6 {
				t.Fatalf("tools/list: %d tools", len(tools))
			}
			res := inspect("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "command=echo inspected-"+name)
			sc, _ := res["structuredContent"].(map[string]any)
			if sc["stdout"] != "inspected-"+name+"\n" || res["isError"] == true {
				t.Fatalf("tools/call: %v", res)
			}
		})
	}
}

// docs/mcp.md runs the Inspector these tests run: every npx line pins the
// version of e2e/mcpinterop/package.json.
func TestTheDocsPinTheInspectorTheTestsRun(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(interopDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Dependencies map[string]string }
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	pinned := "@modelcontextprotocol/inspector@" + pkg.Dependencies["@modelcontextprotocol/inspector"]
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "npx @modelcontextprotocol/inspector") {
			n++
			if !strings.HasPrefix(line, "npx "+pinned+" ") && line != "npx "+pinned {
				t.Errorf("docs/mcp.md runs %q, not %s", line, pinned)
			}
		}
	}
	if n == 0 {
		t.Error("docs/mcp.md runs no Inspector")
	}
}
