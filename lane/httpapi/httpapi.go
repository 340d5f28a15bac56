package httpapi

import (
	"net/http"

	"github.com/sema-agent/sema/lane"
)

// API is the lane's HTTP API over one core Server.
type API struct {
	core *lane.Server
	mux  *http.ServeMux
}

// New builds the HTTP API of core: every route of the lane and the MCP
// face. Mount it (or Handler) where callers and executors reach the lane.
func New(core *lane.Server) *API {
	a := &API{core: core, mux: http.NewServeMux()}
	a.mux.HandleFunc(lane.MCPPath, core.LaneOnly(a.mcpHandler(a.mux)))
	a.mux.Handle("/", core.Handler())
	return a
}

// ServeHTTP serves the lane's HTTP API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }
