package mcp

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stdio is the transport `sema mcp` serves on: newline-delimited JSON-RPC
// read from r and written to w, as the SDK's IOTransport, except at the
// end of the input. A client that writes its calls and closes its end
// (`printf '…' | sema mcp`) still gets every answer: the end of the input
// is held back until each call read so far has been answered, or the
// answers can no longer be written. The SDK cancels the calls still
// running when its reader ends, which would stop a command the client
// asked for and never say how it ended.
func Stdio(r io.Reader, w io.Writer) sdk.Transport {
	return &stdio{inner: &sdk.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}}}
}

type stdio struct{ inner sdk.Transport }

func (t *stdio) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &answeringConn{Connection: c, pending: map[jsonrpc.ID]bool{}, settled: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

// answeringConn counts the calls it has read and not yet answered, so
// that the end of the input waits for their answers.
type answeringConn struct {
	sdk.Connection

	mu       sync.Mutex
	pending  map[jsonrpc.ID]bool // calls read and not yet answered
	writeErr bool                // a write failed: no answer will reach the client
	settled  chan struct{}       // a token whenever pending may have emptied
	closed   chan struct{}

	closeOnce sync.Once
}

func (c *answeringConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		if errors.Is(err, io.EOF) {
			c.awaitAnswers(ctx)
		}
		return nil, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		c.mu.Lock()
		c.pending[req.ID] = true
		c.mu.Unlock()
	}
	return msg, nil
}

func (c *answeringConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	resp, isResponse := msg.(*jsonrpc.Response)
	c.mu.Lock()
	if isResponse {
		delete(c.pending, resp.ID)
	}
	if err != nil {
		c.writeErr = true
	}
	c.mu.Unlock()
	select {
	case c.settled <- struct{}{}:
	default:
	}
	return err
}

func (c *answeringConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// awaitAnswers returns once no call read is unanswered, a write has
// failed, the connection is closed, or ctx is done.
func (c *answeringConn) awaitAnswers(ctx context.Context) {
	for {
		c.mu.Lock()
		done := len(c.pending) == 0 || c.writeErr
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.settled:
		case <-c.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// nopWriteCloser lets the transport close its writer without closing the
// process's stdout under other writers.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
