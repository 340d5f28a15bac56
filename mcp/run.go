package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// RunArgs are run_command's arguments.
type RunArgs struct {
	Command        string `json:"command" jsonschema:"the command, run with sh -c on the device"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"the working directory: absolute, or relative to the device's workspace root (default: the workspace root)"`
	TimeoutMs      int64  `json:"timeout_ms,omitempty" jsonschema:"the device kills the command's process group after this many milliseconds (default 600000: 10 minutes)"`
	MaxOutputBytes int64  `json:"max_output_bytes,omitempty" jsonschema:"bytes of each of stdout and stderr to keep: the head and the tail (default 262144, at most 16777216)"`
}

// RunOutput is what a command wrote, as run_command keeps it: each
// stream's head and tail (see capture), its size, and how much of it the
// text leaves out.
type RunOutput struct {
	Stdout        string `json:"stdout"`
	Stderr        string `json:"stderr"`
	StdoutBytes   int64  `json:"stdoutBytes"`
	StderrBytes   int64  `json:"stderrBytes"`
	StdoutOmitted int64  `json:"stdoutOmittedBytes"`
	StderrOmitted int64  `json:"stderrOmittedBytes"`
}

// RunFailure is run_command's structured result when the command did not
// exit (a timeout, a cancel, an unknown outcome): the failure, and the
// output it wrote before.
type RunFailure struct {
	Failure
	RunOutput
}

// RunResult is run_command's structured result.
type RunResult struct {
	ExitCode int `json:"exitCode"`
	RunOutput
	// DeviceTruncated: the device itself cut a stream at its own cap.
	DeviceTruncated *protocol.Truncated `json:"deviceTruncated,omitempty"`
	InstructionID   string              `json:"instructionId"`
	DeviceID        string              `json:"deviceId"`
}

func (c *callConn) runCommand(ctx context.Context, req *sdk.CallToolRequest, a RunArgs) *sdk.CallToolResult {
	limit, bad := outputCap(a.MaxOutputBytes)
	switch {
	case bad != nil:
		return bad
	case strings.TrimSpace(a.Command) == "":
		return invalid("command is empty")
	case a.TimeoutMs < 0:
		return invalid("timeout_ms %d is negative", a.TimeoutMs)
	}
	// The head and the tail of stdout and of stderr (runOutput).
	if bad := c.holdOutput(ctx, limit, 2*int64(limit)); bad != nil {
		return bad
	}
	timeout := a.TimeoutMs
	if timeout == 0 {
		timeout = defaultTimeout.Milliseconds()
	}
	in := api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: a.Command}, TimeoutMs: timeout}
	dev, bad := c.runTarget(ctx, a.Cwd, &in)
	if bad != nil {
		return bad
	}
	out := newRunOutput(limit, progressOf(ctx, req))
	res, err := c.instruct(ctx, dev, in, client.Sink{Chunk: out.chunk})
	if err != nil {
		return callFailed(ctx, dev.DeviceID, err)
	}
	if !res.Outcome.OK {
		return out.failed(outcomeFailure(dev.DeviceID, res), res.Outcome)
	}
	r := out.result(res, dev.DeviceID)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.render(res.Outcome)}}, StructuredContent: r}
}

// runTarget is the device of a command and its cwd, made absolute. Without
// a cwd the command runs in the device's default (its workspace root), so a
// named device needs nothing more from the lane.
func (c *callConn) runTarget(ctx context.Context, cwd string, in *api.InstructionRequest) (api.Device, *sdk.CallToolResult) {
	if cwd != "" {
		dev, abs, bad := c.resolve(ctx, cwd)
		in.Cwd = abs
		return dev, bad
	}
	if dev, ok := c.target.named(); ok {
		return dev, nil
	}
	dev, err := c.target.device(ctx)
	if err != nil {
		return dev, callFailed(ctx, "", err)
	}
	return dev, nil
}

// outputCap checks max_output_bytes.
func outputCap(n int64) (int, *sdk.CallToolResult) {
	switch {
	case n == 0:
		return DefaultMaxOutput, nil
	case n < minMaxOutput || n > maxMaxOutput:
		return 0, invalid("max_output_bytes %d is out of range [%d, %d]", n, minMaxOutput, maxMaxOutput)
	}
	return int(n), nil
}

// runOutput gathers a command's two streams and tells the client as they
// come.
type runOutput struct {
	stdout, stderr *capture
	progress       *progress
}

func newRunOutput(limit int, p *progress) *runOutput {
	return &runOutput{stdout: newCapture(limit), stderr: newCapture(limit), progress: p}
}

func (o *runOutput) chunk(kind protocol.ChunkKind, data []byte) error {
	switch kind {
	case protocol.ChunkStdout:
		o.stdout.write(data)
	case protocol.ChunkStderr:
		o.stderr.write(data)
	default:
		return nil
	}
	o.progress.output(kind, data, o.stdout.total+o.stderr.total)
	return nil
}

// failed is the tool result of a command that did not exit: the failure
// with the output it wrote before, in the text and the structured result.
// A timeout's message names the argument that raises the limit.
func (o *runOutput) failed(f Failure, out api.Outcome) *sdk.CallToolResult {
	if f.ErrorCode == string(protocol.ErrTimeout) {
		f.Message += " (timeout_ms raises the limit)"
	}
	res := failed(f, o.render(out))
	res.StructuredContent = RunFailure{Failure: f, RunOutput: o.output()}
	return res
}

func (o *runOutput) output() RunOutput {
	return RunOutput{
		Stdout: o.stdout.text("stdout"), Stderr: o.stderr.text("stderr"),
		StdoutBytes: o.stdout.total, StderrBytes: o.stderr.total,
		StdoutOmitted: o.stdout.leftOut(), StderrOmitted: o.stderr.leftOut(),
	}
}

func (o *runOutput) result(res client.Result, deviceID string) RunResult {
	r := RunResult{RunOutput: o.output(), InstructionID: res.ID, DeviceID: deviceID}
	if res.Outcome.ExitCode != nil {
		r.ExitCode = *res.Outcome.ExitCode
	}
	if tr := res.Outcome.Truncated; tr != nil && (tr.Stdout || tr.Stderr) {
		r.DeviceTruncated = tr
	}
	return r
}

// render is the text an agent reads: the exit code, then each stream that
// has output.
func (o *runOutput) render(out api.Outcome) string {
	var b strings.Builder
	if out.ExitCode != nil {
		fmt.Fprintf(&b, "exit code %d\n", *out.ExitCode)
	}
	for _, s := range []struct {
		name string
		c    *capture
		cut  bool
	}{{"stdout", o.stdout, out.Truncated != nil && out.Truncated.Stdout}, {"stderr", o.stderr, out.Truncated != nil && out.Truncated.Stderr}} {
		if s.c.total == 0 && !s.cut {
			continue
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", s.name, s.c.text(s.name))
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		if s.cut {
			fmt.Fprintf(&b, "[the device cut %s at its own limit: the command wrote more]\n", s.name)
		}
	}
	return b.String()
}
