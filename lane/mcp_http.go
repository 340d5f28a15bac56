package lane

import (
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/inproc"
	"github.com/sema-agent/sema/mcp"
)

// MCPPath is where the lane serves the MCP tools on Streamable HTTP.
const MCPPath = "/v1/mcp"

// inProcessBase is the base URL of the lane's calls to itself: never
// resolved, the in-process transport serves them.
const inProcessBase = "http://lane.in-process"

// mcpHandler is /v1/mcp: the MCP tools of package mcp over Streamable HTTP,
// stateless (any replica can answer any request). The tools call the
// lane's own HTTP API in process with the caller's API key, so every rule
// of that API — ownership, refusals, the session binding of §9, the
// content budget — applies to them as to any client. The device is
// ?device=ID, else the caller's only device; the root session is
// ?session=ID, else the request's Mcp-Session-Id, else none.
func (s *Server) mcpHandler() http.HandlerFunc {
	schemas := sdk.NewSchemaCache()
	self := &http.Client{Transport: inproc.Transport{Handler: s.mux}}
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		key, _ := bearer(r) // authenticated() let it through
		lc, err := client.New(inProcessBase, key, client.WithHTTPClient(self))
		if err != nil {
			return nil // the SDK answers 400 "no server available"
		}
		q := r.URL.Query()
		session := q.Get("session")
		if session == "" {
			session = r.Header.Get("Mcp-Session-Id")
		}
		return mcp.NewServer(mcp.Options{Lane: lc, Device: q.Get("device"), Session: session, Request: r.Context(), Schemas: schemas})
	}, &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return s.authenticated(h.ServeHTTP)
}
