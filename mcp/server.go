package mcp

import (
	"context"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// Options configure one MCP server: one connection's view of the lane.
type Options struct {
	// Lane is where the tools' instructions go.
	Lane Lane
	// Device is the device the tools act on; "" is the caller's only
	// device that is not revoked.
	Device string
	// Session is the root session every instruction carries (§9): the lane
	// binds it to the first device it reaches and refuses another. "" sends
	// none.
	Session string
	// Version is the server's version in the MCP handshake.
	Version string
	// Logger logs the server's own events, never a command, a path or
	// content; nil logs nothing.
	Logger *slog.Logger
	// Request, when set, is the HTTP request that carries this server's
	// calls (the lane's stateless face makes a server per request): when it
	// ends — the client hung up — the calls' instructions are cancelled, as
	// the lane's HTTP API cancels an instruction nobody can hear the outcome
	// of. (The SDK ties a call to its request only for protocol versions
	// from 2026-07-28 on; clients of earlier versions cancel by hanging up.)
	Request context.Context
	// Schemas, when set, is shared by servers made per request (the lane's
	// stateless HTTP face) so that the tools' schemas are made once.
	Schemas *sdk.SchemaCache
}

// The run_command defaults and bounds.
const (
	// DefaultMaxOutput is run_command's cap per stream.
	DefaultMaxOutput = 256 << 10
	// maxMaxOutput bounds max_output_bytes: a tool result lives in the
	// agent's context window.
	maxMaxOutput = 16 << 20
	// minMaxOutput is the smallest cap that still shows a head and a tail.
	minMaxOutput = 1 << 10
	// defaultTimeout is run_command's and the file tools' limit when the
	// call names none.
	defaultTimeout = 120 * time.Second
	// fileTimeout bounds the file tools' instructions.
	fileTimeout = 60 * time.Second
)

// NewServer makes the MCP server of the tools over o.Lane.
func NewServer(o Options) *sdk.Server {
	version := o.Version
	if version == "" {
		version = "dev"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "sema", Title: "sema device lane", Version: version}, &sdk.ServerOptions{
		Instructions: serverInstructions,
		Logger:       o.Logger,
		SchemaCache:  o.Schemas,
	})
	t := &tools{lane: o.Lane, session: o.Session, request: o.Request, target: &target{lane: o.Lane, want: o.Device}}
	t.register(s)
	return s
}

const serverInstructions = "These tools run on the user's own machine (a sema device), not on the host " +
	"that runs the model: commands through sh -c in the device's workspace, files by absolute path or " +
	"relative to the workspace root. Every instruction runs at most once; output past the cap is cut " +
	"with a marker that says how much was left out; writes are atomic and verified by SHA-256. The " +
	"device may refuse an instruction (containment, or a person denying it on an approval device)."

// tools holds what every tool call of one connection shares.
type tools struct {
	lane    Lane
	session string
	request context.Context // nil: none
	target  *target
}

func ptr[T any](v T) *T { return &v }

func (t *tools) register(s *sdk.Server) {
	sdk.AddTool(s, &sdk.Tool{
		Name:        "run_command",
		Title:       "Run a shell command on the device",
		Description: "Runs a command with sh -c on the user's device and returns its stdout, stderr and exit code. Live output is sent as progress notifications when the call has a progress token. Each stream keeps at most max_output_bytes (default 256 KiB): its head and its tail, with a marker saying how many bytes were left out.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, t.runCommand)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "read_file",
		Title:       "Read a file on the device",
		Description: "Reads a text file on the user's device. offset (lines to skip) and limit (lines to return) read a part of it. Content past max_output_bytes (default 256 KiB) is left out, and the result says how much.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.readFile)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "write_file",
		Title:       "Write a file on the device",
		Description: "Writes content to a file on the user's device (making its directory if it is missing), replacing it atomically: the file is either the whole new content, verified by SHA-256, or unchanged. Returns the receipt (canonical path, size, sha256, inode, created).",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.writeFile)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "list_directory",
		Title:       "List a directory on the device",
		Description: "Lists a directory on the user's device: each entry's name, type, size, mode and modification time.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.listDirectory)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "file_info",
		Title:       "Describe a file on the device",
		Description: "Returns a path's type, size, mode and modification time on the user's device (a symlink is described, not followed).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.fileInfo)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "list_devices",
		Title:       "List your devices",
		Description: "Lists the devices enrolled for your API key: id, name, platform, workspace root, and whether each is online now.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.listDevices)
}

// instruct sends one instruction to the connection's device, carrying the
// root session.
func (t *tools) instruct(ctx context.Context, dev api.Device, in api.InstructionRequest, sink client.Sink) (client.Result, error) {
	in.RootSessionID = t.session
	if t.request != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer context.AfterFunc(t.request, cancel)()
		defer cancel()
	}
	return t.lane.Instruct(ctx, dev.DeviceID, in, sink)
}

// run is one instruction without output streams (the file tools): its
// data chunks, if any, go to data.
func (t *tools) run(ctx context.Context, dev api.Device, kind protocol.InstructionKind, args any, content []byte, data func([]byte) error) (client.Result, error) {
	in := api.InstructionRequest{Kind: kind, Args: args, TimeoutMs: fileTimeout.Milliseconds()}
	if content != nil {
		in.ContentB64 = ptr(encodeB64(content))
	}
	sink := client.Sink{}
	if data != nil {
		sink.Chunk = func(k protocol.ChunkKind, b []byte) error {
			if k == protocol.ChunkData {
				return data(b)
			}
			return nil
		}
	}
	return t.instruct(ctx, dev, in, sink)
}
