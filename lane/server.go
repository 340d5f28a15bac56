// Package lane is the server side of the sema device lane: the management
// plane (capabilities, enrollment, the user's devices) over HTTP, and the
// WebSocket lane executors connect to. It is embeddable: a Go platform
// mounts Server.Handler on its own mux; `sema server` runs it standalone.
package lane

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Server is one lane replica. Start it with New; stop it with Shutdown.
type Server struct {
	cfg     Config
	store   store.Store
	limiter rateLimiter
	log     *slog.Logger
	mux     *http.ServeMux
	audits  *auditor
	// revocations, when not nil, counts device revocations in a registry
	// this process serves alone (sqlstore's DeviceRevocations).
	revocations func() (uint64, bool)
	// replica names this Server in the leases it takes, so that Shutdown
	// releases them all in one statement (leases.go).
	replica string
	// renewer renews the replica's leases, one statement a round; leaseRound
	// counts its rounds (renewer.go).
	renewer    *leaseRenewer
	leaseRound atomic.Uint64
	// leases takes the handshakes' leases in batches (leasebatch.go).
	leases leaseBatcher

	mu        sync.Mutex
	devices   map[string]*deviceState
	preAuth   int
	preAuthBy map[string]int
	draining  bool
	releasing bool           // Shutdown's release of every lease has begun (leases.go)
	handlers  sync.WaitGroup // one per WebSocket
	callsMu   sync.Mutex     // guards calls, memo and neverStarted; taken after a device's lock, never before
	calls     map[string]*Call
	memo      *settledMemo
	// neverStarted remembers the most recent calls settled before the
	// commit. The device never saw them, so frames never consult it; it
	// keeps POST /v1/instructions/{id}/cancel idempotent for them.
	neverStarted *settledMemo
	shutdownMu   sync.Once
	metrics      metrics // counters for /metrics (metrics.go)
	budget       *contentBudget
	reclaim      reclaimMemory
	// The cluster (forward.go), nil unless Config.AdvertiseURL is set.
	hop       *cluster.Hop
	peers     *cluster.Directory
	forwarder *cluster.Forwarder
	routes    *cluster.Routes // where the devices this replica forwards for were
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:          cfg,
		store:        cfg.Store,
		limiter:      newFixedWindow(cfg.Now, enrollRateLimit, enrollRateWindow),
		log:          cfg.Logger,
		mux:          http.NewServeMux(),
		replica:      ids.New(ids.Replica),
		devices:      map[string]*deviceState{},
		preAuthBy:    map[string]int{},
		calls:        map[string]*Call{},
		memo:         newSettledMemo(cfg.SettledMemo),
		neverStarted: newSettledMemo(cfg.SettledMemo),
	}
	if r, ok := cfg.Store.(interface{ DeviceRevocations() (uint64, bool) }); ok {
		s.revocations = r.DeviceRevocations
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	err = s.registerReplica(ctx)
	if err == nil {
		err = s.startCluster(ctx)
	}
	cancel()
	if err != nil {
		return nil, err
	}
	s.audits = startAuditor(auditorConfig{store: cfg.Store, log: cfg.Logger, clock: cfg.Clock, retention: cfg.AuditRetention, keep: cfg.AuditKeep})
	s.leases.store = cfg.Store
	s.renewer = startLeaseRenewer(s)
	s.budget = newContentBudget(cfg.MaxBufferedContent, s.reclaim.run)
	s.mux.HandleFunc("GET /v1/capabilities", s.capabilities)
	s.mux.HandleFunc("POST /v1/devices/enroll-tokens", s.laneOnly(s.authenticated(s.issueEnrollToken)))
	s.mux.HandleFunc("POST /v1/devices/enroll", s.laneOnly(s.authenticated(s.enroll)))
	s.mux.HandleFunc("GET /v1/devices", s.laneOnly(s.authenticated(s.listDevices)))
	s.mux.HandleFunc("POST /v1/devices/{id}/revoke", s.laneOnly(s.authenticated(s.revokeDevice)))
	s.mux.HandleFunc("POST /v1/devices/{id}/instructions", s.laneOnly(s.routed(s.authenticated(s.postInstruction))))
	s.mux.HandleFunc("POST /v1/devices/{id}/writes", s.laneOnly(s.routed(s.authenticated(s.postWrite))))
	s.mux.HandleFunc("POST /v1/instructions/{id}/cancel", s.laneOnly(s.authenticated(s.cancelInstruction)))
	s.mux.HandleFunc("POST /v1/identities", s.laneOnly(s.authenticated(s.adminOnly(s.createIdentity))))
	s.mux.HandleFunc("GET /v1/identities", s.laneOnly(s.authenticated(s.adminOnly(s.listIdentities))))
	s.mux.HandleFunc("POST /v1/api-keys", s.laneOnly(s.authenticated(s.createAPIKey)))
	s.mux.HandleFunc("GET /v1/api-keys", s.laneOnly(s.authenticated(s.listAPIKeys)))
	s.mux.HandleFunc("DELETE /v1/api-keys/{keyId}", s.laneOnly(s.authenticated(s.revokeAPIKey)))
	s.mux.HandleFunc("GET /v1/sessions/{rootSessionId}", s.laneOnly(s.authenticated(s.getSession)))
	s.mux.HandleFunc("POST /v1/sessions/{rootSessionId}/rebind", s.laneOnly(s.authenticated(s.rebindSession)))
	s.mux.HandleFunc("POST "+handoverPath, s.laneOnly(s.serveHandover))
	s.mux.HandleFunc("POST "+presencePath, s.laneOnly(s.servePresence))
	s.mux.HandleFunc("GET "+cfg.WSPath, s.laneOnly(s.serveWebSocket))
	return s, nil
}

// Handler serves the lane's HTTP endpoints but the MCP face (package
// httpapi mounts that one).
func (s *Server) Handler() http.Handler { return s.mux }

// MCPPath is where the lane serves the MCP tools on Streamable HTTP.
const MCPPath = "/v1/mcp"

// LaneOnly answers 501 when this deployment does not run the device lane.
func (s *Server) LaneOnly(h http.HandlerFunc) http.HandlerFunc { return s.laneOnly(h) }

// Authenticated resolves the request's API key to an identity before h
// runs (CallerOf reads it), or answers 403 auth.forbidden.
func (s *Server) Authenticated(h http.HandlerFunc) http.HandlerFunc { return s.authenticated(h) }

// CallerOf returns the identity Authenticated put in the context.
func CallerOf(ctx context.Context) store.Identity { return callerOf(ctx) }

// capabilitiesBody is GET /v1/capabilities's deviceExecutor object.
type capabilitiesBody struct {
	Enabled              bool            `json:"enabled"`
	ProtocolVersion      int             `json:"protocolVersion"`
	MaxInflightPerDevice int             `json:"maxInflightPerDevice"`
	WSPath               string          `json:"wsPath"`
	Management           managementPaths `json:"management"`
}

// managementPaths tells clients where the management verbs are.
type managementPaths struct {
	EnrollTokens string `json:"enrollTokens"`
	Enroll       string `json:"enroll"`
	Devices      string `json:"devices"`
	MCP          string `json:"mcp"`
	Identities   string `json:"identities"`
	APIKeys      string `json:"apiKeys"`
	Sessions     string `json:"sessions"`
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Disabled {
		writeJSON(w, http.StatusOK, map[string]any{"deviceExecutor": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deviceExecutor": capabilitiesBody{
		Enabled:              true,
		ProtocolVersion:      protocol.ProtocolVersion,
		MaxInflightPerDevice: s.cfg.MaxInflight,
		WSPath:               s.cfg.WSPath,
		Management: managementPaths{
			EnrollTokens: "/v1/devices/enroll-tokens",
			Enroll:       "/v1/devices/enroll",
			Devices:      "/v1/devices",
			MCP:          MCPPath,
			Identities:   "/v1/identities",
			APIKeys:      "/v1/api-keys",
			Sessions:     "/v1/sessions",
		},
	}})
}

// laneOnly answers 501 when this deployment does not run the device lane.
func (s *Server) laneOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		probe.Mark(probe.LaneRequest)
		if s.cfg.Disabled {
			writeError(w, errorf(http.StatusNotImplemented, codeLaneRequired, "this deployment does not run the device lane"))
			return
		}
		h(w, r)
	}
}

type identityKey struct{}

// callerOf returns the identity authenticated() put in the context.
func callerOf(ctx context.Context) store.Identity {
	idn, _ := ctx.Value(identityKey{}).(store.Identity)
	return idn
}

// authenticated resolves "Authorization: Bearer <api key>" to an identity,
// or answers 403 auth.forbidden. The key is looked up by its digest only.
func (s *Server) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, aerr := s.verifyHop(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		key, ok := bearer(r)
		if !ok {
			writeError(w, errorf(http.StatusForbidden, codeForbidden, "a verified identity is required: send Authorization: Bearer <api key>"))
			return
		}
		idn, err := s.store.IdentityByAPIKey(r.Context(), store.DigestOf(key))
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, errorf(http.StatusForbidden, codeForbidden, "the API key is not valid"))
			return
		case err != nil:
			s.unavailable(w, r, "authenticate", err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, idn)))
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" || strings.ContainsAny(key, " \t") {
		return "", false
	}
	return key, true
}

// unavailable answers 503 for a registry failure; the log names the
// operation and the error, never a secret.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, op string, err error) {
	s.log.Error("registry unavailable", "op", op, "path", r.URL.Path, "err", err)
	writeError(w, errorf(http.StatusServiceUnavailable, codeUnavailable, "the device registry is unavailable; try again later"))
}

// audit queues an audit row; it never blocks the caller (see auditor).
func (s *Server) audit(_ context.Context, e store.AuditEvent) { s.metrics.audit(e); s.audits.add(e) }
