package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/mcp"
)

func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, res *sdk.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func eachFace(t *testing.T, body func(t *testing.T, l *liveLane, cs *sdk.ClientSession)) {
	l := startLiveLane(t)
	for _, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			lt := *l
			lt.t = t
			body(t, &lt, f.connect(&lt, l.deviceID, "", nil))
		})
	}
}

func TestTheToolsAreNamedExactlyWithHonestAnnotations(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			a := tool.Annotations
			destructive := a != nil && a.DestructiveHint != nil && *a.DestructiveHint
			readOnly := a != nil && a.ReadOnlyHint
			switch tool.Name {
			case "run_command", "write_file":
				if !destructive || readOnly {
					t.Errorf("%s: annotations %+v, want destructiveHint and not readOnlyHint", tool.Name, a)
				}
			default:
				if !readOnly || destructive {
					t.Errorf("%s: annotations %+v, want readOnlyHint", tool.Name, a)
				}
			}
		}
		i := slices.IndexFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "run_command" })
		schema, _ := json.Marshal(res.Tools[i].InputSchema)
		if ms := strconv.FormatInt(client.DefaultCommandTimeout.Milliseconds(), 10); !strings.Contains(string(schema), "(default "+ms) {
			t.Errorf("run_command's timeout_ms does not say its default %s ms: %s", ms, schema)
		}
		slices.Sort(names)
		want := []string{"file_info", "list_devices", "list_directory", "read_file", "run_command", "write_file"}
		if !slices.Equal(names, want) {
			t.Fatalf("tools %v, want exactly %v", names, want)
		}
	})
}

func TestRunCommandReturnsBothStreamsAndTheExitCode(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		res := call(t, cs, "run_command", map[string]any{"command": "printf out; printf err >&2; exit 3"})
		if res.IsError {
			t.Fatalf("isError: %s", text(res))
		}
		var r mcp.RunResult
		structured(t, res, &r)
		if r.ExitCode != 3 || r.Stdout != "out" || r.Stderr != "err" || r.StdoutOmitted != 0 || r.InstructionID == "" || r.DeviceID != l.deviceID {
			t.Fatalf("result %+v", r)
		}
		if got := text(res); !strings.Contains(got, "exit code 3") || !strings.Contains(got, "--- stdout ---\nout\n") || !strings.Contains(got, "--- stderr ---\nerr\n") {
			t.Fatalf("text %q", got)
		}
	})
}

func TestRunCommandRunsInCwdRelativeToTheWorkspace(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		if err := os.MkdirAll(filepath.Join(l.ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		var r mcp.RunResult
		structured(t, call(t, cs, "run_command", map[string]any{"command": "pwd", "cwd": "sub"}), &r)
		if got, _ := filepath.EvalSymlinks(strings.TrimSpace(r.Stdout)); got != mustEval(t, filepath.Join(l.ws, "sub")) {
			t.Fatalf("pwd %q, want %s", r.Stdout, filepath.Join(l.ws, "sub"))
		}
	})
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// 5 MB of output through a 256 KiB cap: the head and the tail are kept,
// and both the text and the structured result say exactly how many bytes
// were left out — never silently.
func TestOutputPastTheCapIsCutWithAMarkerNeverSilently(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		const total = 5_000_000
		res := call(t, cs, "run_command", map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; printf END", total-3)})
		var r mcp.RunResult
		structured(t, res, &r)
		if r.StdoutBytes != total || r.ExitCode != 0 {
			t.Fatalf("stdoutBytes %d exit %d", r.StdoutBytes, r.ExitCode)
		}
		kept := int64(strings.Count(r.Stdout, "x")) + int64(strings.Count(r.Stdout, "END"))*3
		if r.StdoutOmitted != total-kept || r.StdoutOmitted < total-mcp.DefaultMaxOutput {
			t.Fatalf("omitted %d, kept %d of %d", r.StdoutOmitted, kept, total)
		}
		marker := fmt.Sprintf("[… %d bytes of stdout left out: %d in all …]", r.StdoutOmitted, total)
		if !strings.Contains(r.Stdout, marker) || !strings.HasSuffix(r.Stdout, "END") || !strings.HasPrefix(r.Stdout, "xxx") {
			t.Fatalf("stdout lacks head, marker %q or tail: %.80q … %.80q", marker, r.Stdout, r.Stdout[len(r.Stdout)-80:])
		}
		if !strings.Contains(text(res), marker) {
			t.Fatal("the text result lacks the marker")
		}
	})
}

func TestMaxOutputBytesSetsTheCap(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		var r mcp.RunResult
		structured(t, call(t, cs, "run_command", map[string]any{"command": "seq 1 100000", "max_output_bytes": 2048}), &r)
		if r.StdoutOmitted == 0 || int64(len(r.Stdout)) > 2048+200 {
			t.Fatalf("cap 2048: kept %d bytes, omitted %d", len(r.Stdout), r.StdoutOmitted)
		}
		res := call(t, cs, "run_command", map[string]any{"command": "true", "max_output_bytes": 10})
		if !res.IsError || !strings.HasPrefix(text(res), mcp.CodeInvalidArgs+": max_output_bytes 10") {
			t.Fatalf("cap 10: %s", text(res))
		}
	})
}

func TestATimeoutIsAnErrorResultWithTheProtocolCode(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		res := call(t, cs, "run_command", map[string]any{"command": "echo started; echo warned >&2; exec sleep 30", "timeout_ms": 300})
		var f mcp.RunFailure
		structured(t, res, &f)
		if !res.IsError || f.ErrorCode != "timeout" || !strings.HasPrefix(text(res), "timeout: ") {
			t.Fatalf("isError %v %+v: %s", res.IsError, f, text(res))
		}
		if !strings.Contains(text(res), "started") {
			t.Fatalf("the output before the timeout is lost: %s", text(res))
		}
		if f.Stdout != "started\n" || f.Stderr != "warned\n" || f.StdoutBytes != 8 {
			t.Fatalf("the structured result lost the output: %+v", f)
		}
		if !strings.HasSuffix(f.Message, "(timeout_ms raises the limit)") {
			t.Fatalf("the message does not say how to raise the limit: %q", f.Message)
		}
	})
}

func TestWriteThenReadAFile(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		content := "line 1\nline 2\nhé 3\n"
		res := call(t, cs, "write_file", map[string]any{"path": "notes/a.txt", "content": content})
		var w mcp.WriteResult
		structured(t, res, &w)
		if res.IsError {
			t.Fatalf("write: %s", text(res))
		}
		got, err := os.ReadFile(filepath.Join(l.ws, "notes/a.txt"))
		if err != nil || string(got) != content || w.Bytes != len(content) || w.CanonicalPath == "" || len(w.SHA256) != 64 {
			t.Fatalf("on disk %q (%v), receipt %+v", got, err, w)
		}
		var r mcp.ReadResult
		structured(t, call(t, cs, "read_file", map[string]any{"path": "notes/a.txt"}), &r)
		if r.Content != content || !r.Complete {
			t.Fatalf("read %+v", r)
		}
		structured(t, call(t, cs, "read_file", map[string]any{"path": filepath.Join(l.ws, "notes/a.txt"), "offset": 1, "limit": 1}), &r)
		if r.Content != "line 2\n" {
			t.Fatalf("offset 1 limit 1: %q", r.Content)
		}
	})
}

func TestReadFileStopsAtTheCapAndSaysWhereToGoOn(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		var b strings.Builder
		for i := range 100000 {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		if err := os.WriteFile(filepath.Join(l.ws, "big.txt"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		res := call(t, cs, "read_file", map[string]any{"path": "big.txt", "max_output_bytes": 4096})
		var r mcp.ReadResult
		structured(t, res, &r)
		if r.Complete || r.NextOffset == nil || !strings.HasSuffix(r.Content, "\n") || r.Bytes > 4096 {
			t.Fatalf("read %+v: %.300s", r, text(res))
		}
		want := fmt.Sprintf("line %d\n", *r.NextOffset)
		structured(t, call(t, cs, "read_file", map[string]any{"path": "big.txt", "offset": *r.NextOffset, "limit": 1}), &r)
		if r.Content != want {
			t.Fatalf("the next offset reads %q, want %q", r.Content, want)
		}
		if !strings.Contains(text(res), "read on with offset=") {
			t.Fatalf("text %q", text(res)[len(text(res))-100:])
		}
	})
}

func TestAFailureCarriesTheProtocolsErrorCode(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		for _, tool := range []string{"read_file", "file_info", "list_directory"} {
			res := call(t, cs, tool, map[string]any{"path": "no/such/file"})
			var f mcp.Failure
			structured(t, res, &f)
			if !res.IsError || f.ErrorCode != "not_found" || !strings.HasPrefix(text(res), "not_found: ") || f.InstructionID == "" {
				t.Errorf("%s: isError %v %+v %q", tool, res.IsError, f, text(res))
			}
		}
	})
}

func TestListDirectoryAndFileInfo(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		os.WriteFile(filepath.Join(l.ws, "f.txt"), []byte("12345"), 0o640)
		os.Mkdir(filepath.Join(l.ws, "d"), 0o755)
		var ls mcp.ListResult
		structured(t, call(t, cs, "list_directory", map[string]any{"path": "."}), &ls)
		kinds := map[string]string{}
		for _, e := range ls.Entries {
			kinds[e.Name] = e.Kind
		}
		if kinds["f.txt"] != "file" || kinds["d"] != "dir" {
			t.Fatalf("entries %+v", ls.Entries)
		}
		var e mcp.Entry
		structured(t, call(t, cs, "file_info", map[string]any{"path": "f.txt"}), &e)
		if e.Kind != "file" || e.Size != 5 || e.Mode != "0640" || e.Modified == "" {
			t.Fatalf("file_info %+v", e)
		}
	})
}

func TestListDevicesNamesTheCurrentOne(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		var r mcp.DevicesResult
		structured(t, call(t, cs, "list_devices", map[string]any{}), &r)
		if len(r.Devices) != 1 || r.Devices[0].DeviceID != l.deviceID || !r.Devices[0].Online || r.Current != l.deviceID {
			t.Fatalf("devices %+v", r)
		}
	})
}

// The live output goes out as progress notifications when the call has a
// progress token.
func TestLiveOutputIsSentAsProgress(t *testing.T) {
	l := startLiveLane(t)
	for _, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			var mu sync.Mutex
			var messages []string
			cs := f.connect(l, l.deviceID, "", &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
					mu.Lock()
					messages = append(messages, r.Params.Message)
					mu.Unlock()
				},
			})
			params := &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "echo one; echo two >&2"}}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(t.Context(), params)
			if err != nil || res.IsError {
				t.Fatalf("%v %s", err, text(res))
			}
			// Notifications of a request precede its response on both
			// transports, but the client handles them on its own goroutine.
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				got := strings.Join(messages, "")
				mu.Unlock()
				if strings.Contains(got, "one\n") && strings.Contains(got, "[stderr] two\n") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("progress messages %q", got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// Not named, the caller's only device is the one: with and without a cwd.
func TestTheOnlyDeviceIsTheDefault(t *testing.T) {
	l := startLiveLane(t)
	os.Mkdir(filepath.Join(l.ws, "sub"), 0o755)
	for _, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			cs := f.connect(l, "", "", nil)
			for _, cwd := range []string{"", "sub"} {
				var r mcp.RunResult
				res := call(t, cs, "run_command", map[string]any{"command": "pwd", "cwd": cwd})
				structured(t, res, &r)
				want := mustEval(t, filepath.Join(l.ws, cwd))
				if got, _ := filepath.EvalSymlinks(strings.TrimSpace(r.Stdout)); res.IsError || r.DeviceID != l.deviceID || got != want {
					t.Fatalf("cwd %q: %s", cwd, text(res))
				}
			}
		})
	}
}

// A server for calls that bring their own connection, mounted without the
// authentication that gives them one, fails every call loudly.
func TestACallServerWithoutAConnFailsLoudly(t *testing.T) {
	st, ct := sdk.NewInMemoryTransports()
	ss, err := mcp.NewCallServer("test", nil).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := call(t, cs, "run_command", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(text(res), "no lane for the call") {
		t.Fatalf("%v %s", res.IsError, text(res))
	}
}

// §9: each connection is a root session; the first call binds it to its
// device and another device is refused with the lane's code, naming the
// bound device.
func TestASessionStaysOnItsDevice(t *testing.T) {
	l := startLiveLane(t)
	second, secondWS := l.addDevice()
	for _, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			session := "ses_" + f.name
			if res := call(t, f.connect(l, l.deviceID, session, nil), "run_command", map[string]any{"command": "true"}); res.IsError {
				t.Fatalf("first call: %s", text(res))
			}
			res := call(t, f.connect(l, second, session, nil), "write_file", map[string]any{"path": "x.txt", "content": "no"})
			var fl mcp.Failure
			structured(t, res, &fl)
			if !res.IsError || fl.ErrorCode != "session.device_mismatch" || !strings.Contains(fl.Message, l.deviceID) {
				t.Fatalf("second device: %s", text(res))
			}
			if _, err := os.Stat(filepath.Join(secondWS, "x.txt")); !os.IsNotExist(err) {
				t.Fatal("the refused write happened")
			}
		})
	}
}
