package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/inproc"
	"github.com/sema-agent/sema/internal/version"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/mcp"
)

// inProcessBase is the base URL of the lane's calls to itself: never
// resolved, the in-process transport serves them.
const inProcessBase = "http://lane.in-process"

// mcpHandler is the MCP path: the MCP tools of package mcp over Streamable
// HTTP, stateless (any replica can answer any request), one server for
// every request. The caller's API key is checked first (401 with
// WWW-Authenticate: Bearer, as MCP clients expect); then the request's Conn goes to the tools in its
// token info: the tools call the lane's own HTTP API (self) in process
// with the caller's API key, so every rule of that API — ownership,
// refusals, the session binding of §9, the content budget — applies to
// them as to any client. The device is ?device=ID, else the caller's only
// device; the root session is ?session=ID, else the request's
// Mcp-Session-Id, else none.
func (s *API) mcpHandler(self http.Handler) http.HandlerFunc {
	srv := mcp.NewCallServer(version.String(), nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	conn := func(_ context.Context, key string, r *http.Request) (*auth.TokenInfo, error) {
		// The tools' calls carry the caller's own address, so that what the
		// lane records of them (audit rows) names the caller, not itself.
		hc := &http.Client{Transport: nested{inproc.Transport{Handler: self, RemoteAddr: lane.RemoteAddr(r)}}}
		lc, err := client.New(inProcessBase, key, client.WithHTTPClient(hc))
		if err != nil {
			return nil, auth.ErrInvalidToken
		}
		q := r.URL.Query()
		session := q.Get("session")
		if session == "" {
			session = r.Header.Get("Mcp-Session-Id")
		}
		return mcp.TokenInfo(callerOf(r.Context()).ID, &mcp.Conn{Lane: lc, Device: q.Get("device"), Session: session, Request: r.Context(), Hold: s.outputHold(r)}), nil
	}
	return s.allowedOrigin(s.bearerChallenged(s.mcpBodies(auth.RequireBearerToken(conn, nil)(h).ServeHTTP)))
}

// allowedOrigin refuses a request whose Origin header is present and not
// one of Config.MCPAllowedOrigins, 403, before anything else of it is read:
// a web page the user visits must not reach the lane through the user's
// browser (DNS rebinding), which the MCP transport requires servers to
// prevent.
func (s *API) allowedOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && !slices.ContainsFunc(s.core.Config().MCPAllowedOrigins, func(o string) bool { return strings.EqualFold(o, origin) }) {
			writeError(w, errorf(http.StatusForbidden, api.CodeOriginForbidden,
				"requests from the web origin %q are refused; sema server --mcp-allowed-origin %s would allow it", clip(origin), clip(origin)))
			return
		}
		next(w, r)
	}
}

// maxMCPBody is the longest body of an MCP request: one JSON-RPC message
// (the SDK's own bound). A tool's file content goes on through the HTTP
// API and its budget, within it.
const maxMCPBody = 4 << 20

// mcpBodies holds an MCP request's body to the rules of every other body:
// counted in the content budget for the caller before it is read (503 at
// once when there is no room), at most maxMCPBody (413), and paced
// (pacedBody). The reservation is freed when the request ends.
func (s *API) mcpBodies(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n > maxMCPBody {
			writeError(w, errorf(http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge,
				"the request body is %d bytes, over the %d bytes of one MCP message", n, maxMCPBody))
			return
		}
		if n < 0 {
			n = maxMCPBody
		}
		hold, ok := s.budget.reserve(callerOf(r.Context()).ID, n)
		if !ok {
			s.busy(w, r, n)
			return
		}
		defer hold.release()
		held := &outputHolds{}
		defer held.release()
		r = r.WithContext(context.WithValue(r.Context(), outputHoldsKey{}, held))
		body := bufio.NewReader(io.LimitReader(s.pacedBody(w, r, n), maxMCPBody))
		if isBatch(body) {
			writeError(w, errorf(http.StatusBadRequest, api.CodeBodyShape,
				"the body is a JSON-RPC batch; /v1/mcp takes one MCP message per request (MCP has no batches since its 2025-06-18 revision)"))
			return
		}
		r.Body = readCloser{body, r.Body}
		next(w, r)
	}
}

// isBatch reports whether a body's JSON begins with an array: a JSON-RPC
// batch, whose calls the SDK would run all at once, each a request of the
// lane, inside this one request and its bounds. It reads only the leading
// whitespace and peeks at the byte after it.
func isBatch(body *bufio.Reader) bool {
	for {
		b, err := body.Peek(1)
		if err != nil {
			return false // the SDK answers an empty or broken body
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			body.ReadByte()
		default:
			return b[0] == '['
		}
	}
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// nestedKey marks the context of a request an MCP tool makes inside the
// /v1/mcp request that asked for it.
type nestedKey struct{}

// nested is the transport of an MCP tool's requests: it marks them, so
// that they are not counted again in the identity's requests at once
// (identityRequests), the /v1/mcp request around them being counted.
type nested struct{ http.RoundTripper }

func (n nested) RoundTrip(r *http.Request) (*http.Response, error) {
	return n.RoundTripper.RoundTrip(r.WithContext(context.WithValue(r.Context(), nestedKey{}, true)))
}

// isNested reports whether r is an MCP tool's request (nested).
func isNested(r *http.Request) bool { return r.Context().Value(nestedKey{}) != nil }

// outputHolds are the budget reservations the tool calls of one /v1/mcp
// request hold for what they keep of their output (mcp.Conn.Hold): their
// results are built and written out after the calls return, so they are
// released when the request ends (mcpBodies).
type outputHolds struct {
	mu   sync.Mutex
	held []*reservation
}

type outputHoldsKey struct{}

func (h *outputHolds) add(r *reservation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, r)
}

func (h *outputHolds) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.held {
		r.release()
	}
	h.held = nil
}

// outputHold is mcp.Conn.Hold for the tool calls of r: what they keep of
// their output is the caller's in the buffered-content budget, as request
// content is, so that one key's calls cannot take the lane's memory.
func (s *API) outputHold(r *http.Request) func(n int64) (int64, error) {
	held, _ := r.Context().Value(outputHoldsKey{}).(*outputHolds)
	owner := callerOf(r.Context()).ID
	return func(n int64) (int64, error) {
		if held == nil {
			return 0, nil
		}
		if n > s.budget.perOwner {
			return s.budget.perOwner, nil
		}
		hold, ok := s.budget.reserve(owner, n)
		if !ok {
			s.metrics.contentBusy.Add(1)
			return 0, &client.Error{Status: http.StatusServiceUnavailable, Code: api.CodeBusy,
				Message: fmt.Sprintf("the lane holds as much request content and tool output as it may at once, for all callers or for you; retry after %d s", int(busyRetryAfter.Seconds()))}
		}
		held.add(hold)
		return 0, nil
	}
}
