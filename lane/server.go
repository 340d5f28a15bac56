package lane

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/audit"
	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
)

// Server is one lane replica. Start it with New; stop it with Shutdown.
type Server struct {
	cfg    Config
	store  store.Store
	log    *slog.Logger
	audits *audit.Writer
	// history writes a row for every settled instruction (history.go).
	history *historian
	// revocations, when not nil, counts device revocations in a registry
	// this process serves alone (sqlstore's DeviceRevocations).
	revocations func() (uint64, bool)
	// replica names this Server in the leases it takes, so that Shutdown
	// releases them all in one statement (leases.go).
	replica string
	// renewer renews the replica's leases, one statement a round; leaseRound
	// counts its rounds (renewer.go).
	renewer    *periodic
	janitor    *periodic // prunes idle session bindings (janitor.go)
	leaseRound atomic.Uint64
	// leases takes the handshakes' leases in batches (leasebatch.go).
	leases leaseBatcher

	mu        sync.Mutex
	devices   map[string]*deviceState
	preAuth   int
	preAuthBy map[string]int
	// preAuthConns are the sockets counted in preAuthBy, by address, oldest
	// first (ws.go: the ones a newcomer at the cap may close).
	preAuthConns map[string][]*conn
	draining     bool
	// drainWatch is set when Shutdown begins; drained is closed once no
	// call is left after that (settle), so that Shutdown can let work in
	// flight finish within Config.DrainGrace.
	drainWatch  atomic.Bool
	drained     chan struct{}
	drainedOnce sync.Once
	releasing   bool           // Shutdown's release of every lease has begun (leases.go)
	handlers    sync.WaitGroup // one per WebSocket, and each goroutine of Go
	callsMu     sync.Mutex     // guards calls, memo and neverStarted; taken after a device's lock, never before
	calls       map[string]*Call
	memo        *settledMemo
	// neverStarted remembers the most recent calls settled before the
	// commit. The device never saw them, so frames never consult it; it
	// keeps POST /v1/instructions/{id}/cancel idempotent for them.
	neverStarted *settledMemo
	shutdownMu   sync.Once
	metrics      metrics // counters for /metrics (metrics.go)
	// The cluster (cluster.go), nil unless Config.AdvertiseURL is set.
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
		log:          cfg.Logger,
		replica:      ids.New(ids.Replica),
		devices:      map[string]*deviceState{},
		preAuthBy:    map[string]int{},
		preAuthConns: map[string][]*conn{},
		calls:        map[string]*Call{},
		drained:      make(chan struct{}),
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
	s.audits = audit.Start(audit.Config{Store: cfg.Store, Logger: cfg.Logger, Clock: cfg.Clock, Retention: cfg.AuditRetention, Keep: cfg.AuditKeep, Merge: isRefusal})
	s.history = startHistorian(historianConfig{store: cfg.Store, log: cfg.Logger, clock: cfg.Clock, retention: cfg.HistoryRetention})
	s.leases.store = cfg.Store
	s.renewer = startLeaseRenewer(s)
	s.janitor = startJanitor(s)
	return s, nil
}

// audit queues an audit row; it never blocks the caller (see audit.Writer).
func (s *Server) audit(_ context.Context, e store.AuditEvent) { s.metrics.audit(e); s.audits.Add(e) }
