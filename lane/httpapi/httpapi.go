package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// MCPPath is where the lane serves the MCP tools on Streamable HTTP.
const MCPPath = "/v1/mcp"

// API is the lane's HTTP API over one core Server. It serves every route
// of the lane, the WebSocket endpoint and the MCP face on one handler.
type API struct {
	core    *lane.Server
	cfg     lane.Config
	store   store.Store
	log     *slog.Logger
	mux     *http.ServeMux
	limiter rateLimiter
	budget  *contentBudget
	reclaim reclaimMemory
	metrics httpMetrics
	// requests bounds each identity's requests at once (LimitHTTP).
	requests identityRequests
	// The cluster (forward.go), nil unless the core has an AdvertiseURL.
	replica   string
	hop       *cluster.Hop
	peers     *cluster.Directory
	forwarder *cluster.Forwarder
	routes    *cluster.Routes
}

// New builds the HTTP API of core. Mount it where callers and executors
// reach the lane; core's Shutdown stops what it serves.
func New(core *lane.Server) *API {
	cfg := core.Config()
	s := &API{
		core:    core,
		cfg:     cfg,
		store:   cfg.Store,
		log:     cfg.Logger,
		mux:     http.NewServeMux(),
		limiter: newFixedWindow(cfg.Clock.Now, enrollRateLimit, enrollRateWindow),
	}
	s.reclaim.goFunc = core.Go
	s.budget = newContentBudget(cfg.MaxBufferedContent, cfg.MaxBufferedContentPerIdentity, s.reclaim.run)
	if c := core.Cluster(); c != nil {
		s.replica, s.hop, s.peers, s.forwarder, s.routes = c.Replica, c.Hop, c.Peers, c.Forwarder, c.Routes
		s.forwarder.Answering = func() { s.metrics.forwarded.Add(1) }
		s.forwarder.Unknown = func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("lane: the replica holding the device failed during a forward", "path", r.URL.Path, "err", err)
			writeError(w, errorf(http.StatusBadGateway, api.CodeOutcomeUnknown,
				"the lane replica holding this device failed while answering; the instruction may have run, and is not dispatched again"))
		}
	}
	s.mux.HandleFunc("GET /v1/capabilities", s.capabilities)
	s.mux.HandleFunc("POST /v1/devices/enroll-tokens", s.laneOnly(s.authenticated(s.issueEnrollToken)))
	s.mux.HandleFunc("POST /v1/devices/enroll", s.laneOnly(s.enrollAuthenticated(s.enroll)))
	s.mux.HandleFunc("GET /v1/devices", s.laneOnly(s.authenticated(s.listDevices)))
	s.mux.HandleFunc("POST /v1/devices/{id}/revoke", s.laneOnly(s.authenticated(s.revokeDevice)))
	s.mux.HandleFunc("POST /v1/devices/{id}/rename", s.laneOnly(s.authenticated(s.renameDevice)))
	s.mux.HandleFunc("POST /v1/devices/{id}/forget", s.laneOnly(s.authenticated(s.forgetDevice)))
	s.mux.HandleFunc("POST /v1/devices/{id}/instructions", s.laneOnly(s.routed(s.authenticated(s.postInstruction))))
	s.mux.HandleFunc("POST /v1/devices/{id}/writes", s.laneOnly(s.routed(s.authenticated(s.postWrite))))
	s.mux.HandleFunc("GET "+api.InstructionsPath, s.laneOnly(s.authenticated(s.listInstructions)))
	s.mux.HandleFunc("GET "+api.InstructionsPath+"/{id}", s.laneOnly(s.authenticated(s.getInstruction)))
	s.mux.HandleFunc("POST /v1/instructions/{id}/cancel", s.laneOnly(s.authenticated(s.cancelInstruction)))
	s.mux.HandleFunc("POST /v1/identities", s.laneOnly(s.authenticated(s.adminOnly(s.createIdentity))))
	s.mux.HandleFunc("GET /v1/identities", s.laneOnly(s.authenticated(s.adminOnly(s.listIdentities))))
	s.mux.HandleFunc("POST /v1/identities/{id}/disable", s.laneOnly(s.authenticated(s.adminOnly(s.setIdentityDisabled(true)))))
	s.mux.HandleFunc("POST /v1/identities/{id}/enable", s.laneOnly(s.authenticated(s.adminOnly(s.setIdentityDisabled(false)))))
	s.mux.HandleFunc("GET /v1/audit", s.laneOnly(s.authenticated(s.adminOnlyTo("read the audit trail", s.listAudit))))
	s.mux.HandleFunc("GET /v1/audit/checkpoint", s.laneOnly(s.authenticated(s.adminOnlyTo("read the audit trail", s.auditCheckpoint))))
	s.mux.HandleFunc("POST /v1/audit/verify", s.laneOnly(s.authenticated(s.adminOnlyTo("verify the audit trail", s.verifyAudit))))
	s.mux.HandleFunc("GET /v1/whoami", s.laneOnly(s.authenticated(s.whoami)))
	s.mux.HandleFunc("POST /v1/api-keys", s.laneOnly(s.authenticated(s.createAPIKey)))
	s.mux.HandleFunc("GET /v1/api-keys", s.laneOnly(s.authenticated(s.listAPIKeys)))
	s.mux.HandleFunc("DELETE /v1/api-keys/{keyId}", s.laneOnly(s.authenticated(s.revokeAPIKey)))
	s.mux.HandleFunc("GET /v1/sessions/{rootSessionId}", s.laneOnly(s.authenticated(s.getSession)))
	s.mux.HandleFunc("POST /v1/sessions/{rootSessionId}/rebind", s.laneOnly(s.authenticated(s.rebindSession)))
	s.mux.HandleFunc("DELETE /v1/sessions/{rootSessionId}", s.laneOnly(s.authenticated(s.deleteSession)))
	s.mux.HandleFunc("POST "+api.HandoverPath, s.laneOnly(s.serveHandover))
	s.mux.HandleFunc("POST "+api.PresencePath, s.laneOnly(s.servePresence))
	s.mux.HandleFunc("GET "+s.cfg.WSPath, s.laneOnly(core.ServeWebSocket))
	s.mux.HandleFunc(MCPPath, s.laneOnly(s.mcpHandler(s.mux)))
	return s
}

// ServeHTTP serves the lane's HTTP API.
func (s *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// noRoute answers a request no route takes in the error shape of every
// other error: 404 request.not_found, or 405 request.method_not_allowed
// with the mux's Allow when the path is served for other methods (the
// mux, asked on a probe, tells the two apart).
func (s *API) noRoute(w http.ResponseWriter, r *http.Request) {
	probe := &statusProbe{header: http.Header{}}
	s.mux.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		writeError(w, errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "%s is not served for %s", r.URL.Path, r.Method))
		return
	}
	writeError(w, errorf(http.StatusNotFound, api.CodeNotFound, "the lane serves no %s", r.URL.Path))
}

// statusProbe keeps the status and headers of an answer and drops its body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }

func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

func (p *statusProbe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

// audit queues an audit row with the core's auditor.
func (s *API) audit(ctx context.Context, e store.AuditEvent) { s.core.Audit(ctx, e) }

func (s *API) capabilities(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Disabled {
		writeJSON(w, http.StatusOK, map[string]any{"deviceExecutor": false})
		return
	}
	writeJSON(w, http.StatusOK, api.CapabilitiesResponse{DeviceExecutor: api.Capabilities{
		Enabled:              true,
		ProtocolVersion:      protocol.ProtocolVersion,
		MaxInflightPerDevice: s.cfg.MaxInflight,
		WSPath:               s.cfg.WSPath,
		Management: api.ManagementPaths{
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
func (s *API) laneOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		probe.Mark(probe.LaneRequest)
		if s.cfg.Disabled {
			writeError(w, errorf(http.StatusNotImplemented, api.CodeLaneRequired, "this deployment does not run the device lane"))
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
func (s *API) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return s.authenticatedOr(func(message string) *apiError {
		return errorf(http.StatusForbidden, api.CodeForbidden, "%s", message)
	}, h)
}

// bearerChallenged is authenticated for the MCP endpoint: a missing or
// unknown key is 401 with WWW-Authenticate: Bearer, as the MCP
// authorization spec and its clients expect.
func (s *API) bearerChallenged(h http.HandlerFunc) http.HandlerFunc {
	return s.authenticatedOr(func(message string) *apiError {
		e := errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%s", message)
		e.challenge = `Bearer realm="sema", error="invalid_token"`
		return e
	}, h)
}

// authTimeout bounds the registry read that authenticates a request. Every
// request begins with it, so a registry that stops answering (its host
// gone silent, its process stopped: no error, no answer) costs a caller
// this long and a 503, never a wait without end; nothing was sent to any
// device by then.
const authTimeout = 10 * time.Second

// authenticatedOr is authenticated with refuse making the refusal of a
// request without a valid key.
func (s *API) authenticatedOr(refuse func(message string) *apiError, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, aerr := s.verifyHop(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		key, ok := bearer(r)
		if !ok {
			writeError(w, refuse("a verified identity is required: send Authorization: Bearer <api key>"))
			return
		}
		if !plausibleAPIKey(r) {
			// Not the shape of a key: refused without asking the registry.
			writeError(w, refuse("the API key is not valid"))
			return
		}
		actx, cancel := context.WithTimeout(r.Context(), authTimeout)
		idn, err := s.store.IdentityByAPIKey(actx, store.DigestOf(key))
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, refuse("the API key is not valid"))
			return
		case err != nil:
			s.unavailable(w, r, "authenticate", err)
			return
		}
		if !isNested(r) { // an MCP tool's request is within a counted one
			bound, ok := s.requests.enter(idn.ID)
			if !ok {
				s.tooManyRequests(w, r, bound)
				return
			}
			defer s.requests.leave(idn.ID)
		}
		h(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, idn)))
	}
}

// enrollTokenKey marks a request authenticated by its enrollment token.
type enrollTokenKey struct{}

// enrollAuthenticated authenticates POST /v1/devices/enroll by the user's
// API key, as every other call, or by the enrollment token itself
// (Authorization: Bearer set_…): the token stands for the credential of
// the identity it was issued to, for this one call and the token it
// carries, while it has not expired. So the device being enrolled never
// needs the user's long-lived key. An unknown or expired token is the
// enrollment refusal every other case gets (§1.1: indistinguishable).
func (s *API) enrollAuthenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok || !strings.HasPrefix(token, api.EnrollTokenPrefix) {
			s.authenticated(h)(w, r)
			return
		}
		actx, cancel := context.WithTimeout(r.Context(), authTimeout)
		idn, err := s.store.IdentityByEnrollToken(actx, store.DigestOf(token))
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeBody(w, http.StatusForbidden, enrollmentInvalidBody)
			return
		case err != nil:
			s.unavailable(w, r, "authenticate", err)
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), identityKey{}, idn), enrollTokenKey{}, token)
		h(w, r.WithContext(ctx))
	}
}

// enrollTokenOf is the token a request was authenticated by, "" for an API key.
func enrollTokenOf(ctx context.Context) string {
	t, _ := ctx.Value(enrollTokenKey{}).(string)
	return t
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
func (s *API) unavailable(w http.ResponseWriter, r *http.Request, op string, err error) {
	s.log.Error("registry unavailable", "op", op, "path", r.URL.Path, "err", err)
	writeError(w, errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "the device registry is unavailable; try again later"))
}
