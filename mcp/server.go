package mcp

import (
	"context"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

// Options configure the server `sema mcp` runs: one connection's view of
// the lane.
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
}

// Conn is what one call of a server made by NewCallServer acts through:
// the lane seen by the caller, the device, the root session, and the HTTP
// request that carries the call.
type Conn struct {
	Lane    Lane
	Device  string
	Session string
	// Request, when set, is the HTTP request that carries the call: when it
	// ends — the client hung up — the call's instruction is cancelled, as
	// the lane's HTTP API cancels an instruction nobody can hear the outcome
	// of. (The SDK ties a call to its request only for protocol versions
	// from 2026-07-28 on; clients of earlier versions cancel by hanging up.)
	Request context.Context
	// Hold, when set, holds n bytes of the lane's buffered-content budget
	// for what a call keeps of its output, until the request that carries
	// the call ends, so that concurrent calls cannot take the lane's
	// memory. It returns the most the caller may hold when n is over it
	// (the call can never fit), or an error (a *client.Error, e.g.
	// service.busy) when the budget has no room now.
	Hold func(n int64) (share int64, err error)
}

// connKey is Conn's key in a call's token info.
const connKey = "sema.conn"

// TokenInfo is the token info a server of NewCallServer finds a call's
// Conn in: the lane's authentication puts it in the request's context
// (with the SDK's auth.RequireBearerToken) for the identity it verified.
// The SDK's middleware refuses a token info without an expiry; this one
// lives as long as the request that carries it, so any bound will do.
func TokenInfo(identityID string, c *Conn) *auth.TokenInfo {
	return &auth.TokenInfo{UserID: identityID, Expiration: time.Now().Add(24 * time.Hour), Extra: map[string]any{connKey: c}}
}

// NewServer makes the MCP server of the tools over o.Lane: one connection,
// one device, one session.
func NewServer(o Options) *sdk.Server {
	fixed := &callConn{lane: o.Lane, session: o.Session, target: &target{lane: o.Lane, want: o.Device}}
	return newServer(o.Version, o.Logger, &tools{fixed: fixed})
}

// NewCallServer makes one MCP server for calls that each bring their own
// Conn in their token info (TokenInfo): the lane's stateless HTTP face
// serves every request with it, so the tools' schemas are made once.
func NewCallServer(version string, logger *slog.Logger) *sdk.Server {
	return newServer(version, logger, &tools{})
}

func newServer(version string, logger *slog.Logger, t *tools) *sdk.Server {
	if version == "" {
		version = "dev"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "sema", Title: "sema device lane", Version: version}, &sdk.ServerOptions{
		Instructions: serverInstructions,
		Logger:       logger,
	})
	t.register(s)
	return s
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
	// defaultTimeout is run_command's limit when the call names none: the
	// CLI's run has the same.
	defaultTimeout = client.DefaultCommandTimeout
	// fileTimeout bounds the file tools' instructions.
	fileTimeout = 60 * time.Second
)

const serverInstructions = "These tools run on the user's own machine (a sema device), not on the host " +
	"that runs the model: commands through sh -c in the device's workspace, files by absolute path or " +
	"relative to the workspace root. Every instruction runs at most once; output past the cap is cut " +
	"with a marker that says how much was left out; writes are atomic and verified by SHA-256. The " +
	"device may refuse an instruction (containment, or a person denying it on an approval device)."

// tools finds each call's connection: the fixed one of `sema mcp`, or the
// call's own.
type tools struct {
	fixed *callConn // nil: each call brings its Conn
}

// callConn is what a call acts through.
type callConn struct {
	lane    Lane
	session string
	request context.Context              // nil: none
	hold    func(n int64) (int64, error) // Conn.Hold; nil: none
	target  *target
}

// conn is the call's connection; an isError result when the call brings
// none (a server of NewCallServer mounted without TokenInfo).
func (t *tools) conn(req *sdk.CallToolRequest) (*callConn, *sdk.CallToolResult) {
	if t.fixed != nil {
		return t.fixed, nil
	}
	var c *Conn
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		c, _ = req.Extra.TokenInfo.Extra[connKey].(*Conn)
	}
	if c == nil || c.Lane == nil {
		return nil, failed(Failure{ErrorCode: CodeUnreachable, Message: "this MCP server has no lane for the call (its HTTP handler must authenticate with mcp.TokenInfo)"}, "")
	}
	return &callConn{lane: c.Lane, session: c.Session, request: c.Request, hold: c.Hold, target: &target{lane: c.Lane, want: c.Device}}, nil
}

// holdOutput holds n bytes for what a call with max_output_bytes limit
// keeps of its output (Conn.Hold); a result when it cannot, before
// anything is sent.
func (c *callConn) holdOutput(ctx context.Context, limit int, n int64) *sdk.CallToolResult {
	if c.hold == nil {
		return nil
	}
	share, err := c.hold(n)
	switch {
	case share > 0:
		return invalid("with max_output_bytes %d the call would keep up to %s of output, over the %s of this lane's buffered-content budget one caller may hold (sema server --max-buffered-content-per-identity); ask for less", limit, words.Bytes(n), words.Bytes(share))
	case err != nil:
		return callFailed(ctx, "", err)
	}
	return nil
}

// handle adapts a tool of callConn to the SDK's typed handler.
func handle[In any](t *tools, h func(c *callConn, ctx context.Context, req *sdk.CallToolRequest, in In) *sdk.CallToolResult) sdk.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		c, bad := t.conn(req)
		if bad != nil {
			return bad, nil, nil
		}
		return h(c, ctx, req, in), nil, nil
	}
}

func ptr[T any](v T) *T { return &v }

func (t *tools) register(s *sdk.Server) {
	sdk.AddTool(s, &sdk.Tool{
		Name:        "run_command",
		Title:       "Run a shell command on the device",
		Description: "Runs a command with sh -c on the user's device and returns its stdout, stderr and exit code. Live output is sent as progress notifications when the call has a progress token. Each stream keeps at most max_output_bytes (default 256 KiB): its head and its tail, with a marker saying how many bytes were left out.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, handle(t, (*callConn).runCommand))
	sdk.AddTool(s, &sdk.Tool{
		Name:        "read_file",
		Title:       "Read a file on the device",
		Description: "Reads a text file on the user's device. offset (lines to skip) and limit (lines to return) read a part of it. Content past max_output_bytes (default 256 KiB) is left out, and the result says how much.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, handle(t, (*callConn).readFile))
	sdk.AddTool(s, &sdk.Tool{
		Name:        "write_file",
		Title:       "Write a file on the device",
		Description: "Writes content to a file on the user's device (making its directory if it is missing), replacing it atomically: the file is either the whole new content, verified by SHA-256, or unchanged. Returns the receipt (canonical path, size, sha256, inode, created).",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, handle(t, (*callConn).writeFile))
	sdk.AddTool(s, &sdk.Tool{
		Name:        "list_directory",
		Title:       "List a directory on the device",
		Description: "Lists a directory on the user's device: each entry's name, type, size, mode and modification time.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, handle(t, (*callConn).listDirectory))
	sdk.AddTool(s, &sdk.Tool{
		Name:        "file_info",
		Title:       "Describe a file on the device",
		Description: "Returns a path's type, size, mode and modification time on the user's device (a symlink is described, not followed).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, handle(t, (*callConn).fileInfo))
	sdk.AddTool(s, &sdk.Tool{
		Name:        "list_devices",
		Title:       "List your devices",
		Description: "Lists the devices enrolled for your API key: id, name, platform, workspace root, and whether each is online now.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, handle(t, (*callConn).listDevices))
}

// instruct sends one instruction to the connection's device, carrying the
// root session.
func (c *callConn) instruct(ctx context.Context, dev api.Device, in api.InstructionRequest, sink client.Sink) (client.Result, error) {
	in.RootSessionID = c.session
	if c.request != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer context.AfterFunc(c.request, cancel)()
		defer cancel()
	}
	return c.lane.Instruct(ctx, dev.DeviceID, in, sink)
}

// run is one instruction without output streams (the file tools): its
// data chunks, if any, go to data.
func (c *callConn) run(ctx context.Context, dev api.Device, kind protocol.InstructionKind, args any, content []byte, data func([]byte) error) (client.Result, error) {
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
	return c.instruct(ctx, dev, in, sink)
}
