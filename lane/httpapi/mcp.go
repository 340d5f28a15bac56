package httpapi

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/inproc"
	"github.com/sema-agent/sema/internal/version"
	"github.com/sema-agent/sema/mcp"
)

// inProcessBase is the base URL of the lane's calls to itself: never
// resolved, the in-process transport serves them.
const inProcessBase = "http://lane.in-process"

// mcpHandler is the MCP path: the MCP tools of package mcp over Streamable
// HTTP, stateless (any replica can answer any request), one server for
// every request. The caller's API key is checked first (403 auth.forbidden
// as on every endpoint); then the request's Conn goes to the tools in its
// token info: the tools call the lane's own HTTP API (self) in process
// with the caller's API key, so every rule of that API — ownership,
// refusals, the session binding of §9, the content budget — applies to
// them as to any client. The device is ?device=ID, else the caller's only
// device; the root session is ?session=ID, else the request's
// Mcp-Session-Id, else none.
func (s *API) mcpHandler(self http.Handler) http.HandlerFunc {
	srv := mcp.NewCallServer(version.String(), nil)
	hc := &http.Client{Transport: inproc.Transport{Handler: self}}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	conn := func(_ context.Context, key string, r *http.Request) (*auth.TokenInfo, error) {
		lc, err := client.New(inProcessBase, key, client.WithHTTPClient(hc))
		if err != nil {
			return nil, auth.ErrInvalidToken
		}
		q := r.URL.Query()
		session := q.Get("session")
		if session == "" {
			session = r.Header.Get("Mcp-Session-Id")
		}
		return mcp.TokenInfo(callerOf(r.Context()).ID, &mcp.Conn{Lane: lc, Device: q.Get("device"), Session: session, Request: r.Context()}), nil
	}
	return s.authenticated(auth.RequireBearerToken(conn, nil)(h).ServeHTTP)
}
