package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/internal/recordconn"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
)

// Environment of `sema server`.
const (
	EnvDataDir  = "SEMA_DATA_DIR"     // the server's data dir (SQLite registry, admin.key)
	EnvPostgres = "SEMA_POSTGRES_URL" // keeps the database URL (and its password) out of the process list
)

type serverFlags struct {
	listen, data, postgres, publicURL, tlsCert, tlsKey string
	advertiseURL                                       string
	logFormat                                          string
	verbose                                            bool
	shutdownTimeout                                    time.Duration
	cfg                                                lane.Config
	httpLimits                                         httpapi.HTTPLimits
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	c := &cobra.Command{
		Use:   "server [--listen ADDR] [--data DIR | --postgres URL] [--public-url URL] [--tls-cert F --tls-key F]",
		Short: "Run the lane server: the management API, the device WebSocket lane and /metrics",
		Long: "server runs the lane: the HTTP API of docs/api.md, the WebSocket executors dial, and /metrics\n" +
			"(Prometheus text format, counts only). The registry is SQLite in --data unless --postgres is given.\n" +
			"The first start creates an admin identity, prints its API key once and writes it to\n" +
			"<data>/" + AdminKeyFile + " (mode 0600). SIGTERM or SIGINT drains: every device gets bye draining,\n" +
			"work in flight settles outcome_unknown, and the server exits 0.\n" +
			"Every timing and bound takes the spec's default; the enrollment rate limit (10 per 60 s per\n" +
			"identity) is fixed and has no flag.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runServer(c, &f) },
	}
	c.AddCommand(newRotateClusterSecretCmd())
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8420", "the address to listen on")
	fl.StringVar(&f.data, "data", "", "the data dir: the SQLite registry (unless --postgres) and "+AdminKeyFile+" (default $"+EnvDataDir+", else the OS config dir + /sema/server)")
	fl.StringVar(&f.postgres, "postgres", "", "a PostgreSQL URL for the registry instead of SQLite (or $"+EnvPostgres+")")
	fl.StringVar(&f.publicURL, "public-url", "", "the URL devices and users reach this server at, for the lines it prints (default from --listen)")
	fl.StringVar(&f.advertiseURL, "advertise-url", "", "with --postgres: the URL the other replicas reach this one at (default from --listen; the host's name when it listens on every address)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM); needs --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log more (every request)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long draining may take on SIGTERM")

	cfg, def := &f.cfg, lane.DefaultConfig()
	fl.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", def.HeartbeatInterval, "helloAck.heartbeatIntervalMs (§1.5)")
	fl.DurationVar(&cfg.LeaseTTL, "lease-ttl", def.LeaseTTL, "a device's connection lease (§1.4)")
	fl.DurationVar(&cfg.ReconnectGrace, "reconnect-grace", def.ReconnectGrace, "how long a dropped device's work waits for it (R4)")
	fl.DurationVar(&cfg.GapTimeout, "gap-timeout", def.GapTimeout, "a stream gap fails the instruction after this (R8)")
	fl.DurationVar(&cfg.CancelGrace, "cancel-grace", def.CancelGrace, "a cancel must be answered within this (R11)")
	fl.DurationVar(&cfg.ExecutionGrace, "execution-grace", def.ExecutionGrace, "added to timeoutMs as the lane's backstop (R12)")
	fl.DurationVar(&cfg.TokenTTL, "token-ttl", def.TokenTTL, "an enrollment token's lifetime (§1.1)")
	fl.IntVar(&cfg.MaxInflight, "max-inflight", def.MaxInflight, "instructions in flight per device (§1.5)")
	fl.DurationVar(&cfg.HandshakeDeadline, "handshake-deadline", def.HandshakeDeadline, "socket open to helloAck (§1.2)")
	fl.IntVar(&cfg.ReorderEntries, "reorder-entries", def.ReorderEntries, "a stream's reorder buffer, entries (§4)")
	fl.IntVar(&cfg.ReorderBytes, "reorder-bytes", def.ReorderBytes, "a stream's reorder buffer, decoded bytes (§4)")
	fl.IntVar(&cfg.DeliveryEntries, "delivery-entries", def.DeliveryEntries, "chunks a caller may leave unread before its instruction is cancelled (§4)")
	fl.IntVar(&cfg.DeliveryBytes, "delivery-bytes", def.DeliveryBytes, "bytes a caller may leave unread before its instruction is cancelled (§4)")
	fl.IntVar(&cfg.PayloadPartBytes, "payload-part-bytes", def.PayloadPartBytes, "the size of a write's payload parts (§2.1)")
	fl.IntVar(&cfg.SettledMemo, "settled-memo", def.SettledMemo, "recently settled instructions remembered (§2.4)")
	fl.IntVar(&cfg.MaxPreAuth, "max-preauth", def.MaxPreAuth, "sockets still in the handshake, in total (§1.2)")
	fl.IntVar(&cfg.MaxPreAuthPerAddr, "max-preauth-per-addr", def.MaxPreAuthPerAddr, "sockets still in the handshake, per remote address (§1.2)")
	fl.DurationVar(&cfg.WriteTimeout, "write-timeout", def.WriteTimeout, "a socket that cannot take a frame in this time is closed")
	fl.DurationVar(&cfg.AuditRetention, "audit-retention", def.AuditRetention, "audit rows older than this are pruned, hourly (the first start's record is kept)")
	fl.DurationVar(&cfg.HistoryRetention, "history-retention", def.HistoryRetention, "instruction history rows settled longer ago than this are pruned, hourly")
	fl.StringVar(&cfg.HistoryCommands, "history-commands", def.HistoryCommands, "what the instruction history keeps of a command: full (its text) or digest (its SHA-256 and length)")
	fl.Int64Var(&cfg.MaxBufferedContent, "max-buffered-content", def.MaxBufferedContent,
		"bytes of instruction bodies and write content held in memory at once, server-wide (256 MiB); over it 503 service.busy")
	fl.Int64Var(&cfg.MaxBufferedContentPerIdentity, "max-buffered-content-per-identity", def.MaxBufferedContentPerIdentity,
		"what one identity's requests may hold of --max-buffered-content (0: a quarter of it, at least 1 MiB), so no caller can take it all")
	fl.DurationVar(&cfg.BodyIdleTimeout, "body-idle-timeout", def.BodyIdleTimeout, "a request body that stops arriving this long is dropped (408) and what it held freed")
	fl.Int64Var(&cfg.BodyMinRate, "body-min-rate", def.BodyMinRate, "the slowest a request body may arrive on average, bytes per second, after the first --body-idle-timeout")
	fl.DurationVar(&cfg.MaxTimeout, "max-timeout", def.MaxTimeout, "the longest timeoutMs an instruction may carry; a longer one is 400")
	fl.DurationVar(&cfg.DrainGrace, "drain-grace", def.DrainGrace, "on SIGTERM, how long work in flight may finish before it is written off (within --shutdown-timeout)")
	fl.IntVar(&cfg.MaxAPIKeysPerIdentity, "max-api-keys-per-identity", def.MaxAPIKeysPerIdentity, "API keys one identity may hold (not revoked); one more is 409")
	fl.IntVar(&cfg.MaxSessionsPerIdentity, "max-sessions-per-identity", def.MaxSessionsPerIdentity, "root session bindings one identity may hold; an instruction or rebind that binds one more is 409")
	fl.DurationVar(&cfg.SessionIdleExpiry, "session-idle-expiry", def.SessionIdleExpiry, "a root session binding unused this long is pruned (checked hourly)")
	fl.StringArrayVar(&cfg.MCPAllowedOrigins, "mcp-allowed-origin", nil, "a browser origin (scheme://host[:port]) /v1/mcp answers (repeatable); a request with any other Origin is 403")
	fl.DurationVar(&f.httpLimits.IdleTimeout, "http-idle-timeout", httpapi.DefaultIdleTimeout, "a keep-alive HTTP connection idle this long is closed")
	fl.IntVar(&f.httpLimits.MaxConns, "max-http-conns", httpapi.DefaultMaxHTTPConns, "open HTTP connections that are not WebSockets; at it a new one closes an idle one or one waiting 5 s for its request, else it is closed at once")
	fl.IntVar(&f.httpLimits.MaxRequestsPerIdentity, "max-requests-per-identity", 0, "requests one identity may have open at once; one more is 503 (0: a quarter of --max-http-conns, at least 1), so no caller can take every connection")
	return c
}

func runServer(c *cobra.Command, f *serverFlags) error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	var cert *tls.Certificate
	if f.tlsCert != "" {
		// Read before anything starts, so that a wrong path or a key that is
		// not the certificate's stops the server before its first start.
		c, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cert = &c
	}
	switch {
	case f.cfg.AuditRetention <= 0:
		return usageError{fmt.Errorf("--audit-retention %v: want a positive duration", f.cfg.AuditRetention)}
	case f.cfg.HistoryRetention <= 0:
		return usageError{fmt.Errorf("--history-retention %v: want a positive duration", f.cfg.HistoryRetention)}
	case f.cfg.HistoryCommands != lane.HistoryCommandsFull && f.cfg.HistoryCommands != lane.HistoryCommandsDigest:
		return usageError{fmt.Errorf("--history-commands %q: want %s or %s", f.cfg.HistoryCommands, lane.HistoryCommandsFull, lane.HistoryCommandsDigest)}
	case f.httpLimits.IdleTimeout <= 0:
		return usageError{fmt.Errorf("--http-idle-timeout %v must be positive", f.httpLimits.IdleTimeout)}
	case f.httpLimits.MaxConns < 1:
		return usageError{fmt.Errorf("--max-http-conns %d must be at least 1", f.httpLimits.MaxConns)}
	case f.httpLimits.MaxRequestsPerIdentity < 0:
		return usageError{fmt.Errorf("--max-requests-per-identity %d must not be negative", f.httpLimits.MaxRequestsPerIdentity)}
	case f.cfg.MaxBufferedContent < 1<<20:
		return usageError{fmt.Errorf("--max-buffered-content %d must be at least 1 MiB (1048576)", f.cfg.MaxBufferedContent)}
	}
	if f.postgres == "" {
		f.postgres = os.Getenv(EnvPostgres)
	}
	log, err := serverLogger(f.logFormat, f.verbose)
	if err != nil {
		return err
	}
	dir, err := serverDataDir(f.data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	defer lock.Release()
	ln, err := net.Listen("tcp", f.listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen: another process listens on %s: --listen picks another address (%w)", f.listen, err)
	}
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	localURL := scheme + "://" + ln.Addr().String()
	public := f.publicURL
	if public == "" {
		if public, err = namedURL(scheme, ln.Addr()); err != nil {
			public = localURL // only the lines the server prints use it
		}
	}
	if u, err := url.Parse(public); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Errorf("--public-url %q: want http(s)://host[:port]", f.publicURL)}
	}

	advertise, err := advertiseURL(f, scheme, ln.Addr())
	if err != nil {
		return err
	}

	ctx := c.Context()
	st, kind, err := openStore(ctx, dir, f.postgres)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := takeBackLeases(ctx, st, log); err != nil {
		return err
	}
	if err := ensureAdmin(ctx, st, dir, public, log); err != nil {
		return err
	}
	cfg := f.cfg
	cfg.Store, cfg.Logger, cfg.AdvertiseURL = st, log, advertise
	cfg.AuditKeep = []string{eventAdminCreated} // ensureAdmin reads it on every start
	srv, err := lane.New(cfg)
	if err != nil {
		return usageError{err}
	}
	doors := httpapi.New(srv)
	hs := newHTTPServer(doors, log, f.verbose)
	if ln, err = doors.LimitHTTP(hs, ln, f.httpLimits); err != nil {
		return usageError{err}
	}
	served := make(chan error, 1)
	go func() {
		if cert != nil {
			hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
			// The TLS records of a response leave in few large writes.
			served <- hs.ServeTLS(recordconn.Listener(ln), "", "")
		} else {
			served <- hs.Serve(ln)
		}
	}()
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); f.tlsCert == "" && !net.ParseIP(host).IsLoopback() && !strings.HasPrefix(public, "https://") {
		log.Warn("plain HTTP on a non-loopback address: API keys and enrollment tokens cross the network in clear; " +
			"use --tls-cert/--tls-key, or a TLS proxy and an https --public-url")
	}
	log.Info("lane listening", "url", localURL, "public_url", public, "advertise_url", advertise, "store", kind, "data", dir,
		"heartbeat_interval", cfg.HeartbeatInterval, "max_inflight", cfg.MaxInflight, "token_ttl", cfg.TokenTTL)

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("draining: every device gets bye draining")
	case serveErr = <-served:
		log.Error("the HTTP server stopped", "err", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownTimeout)
	defer cancel()
	drainErr := srv.Shutdown(sctx)
	httpErr := hs.Shutdown(sctx)
	if serveErr == nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	switch {
	case serveErr != nil:
		return serveErr
	case drainErr != nil || httpErr != nil:
		return fmt.Errorf("draining did not finish within --shutdown-timeout %v: %w", f.shutdownTimeout, errors.Join(drainErr, httpErr))
	}
	log.Info("stopped")
	return nil
}

func serverLogger(format string, verbose bool) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(Stderr, opts)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format %q: want text or json", format)}
}

// newHTTPServer mounts the lane and /metrics.
func newHTTPServer(doors *httpapi.API, log *slog.Logger, verbose bool) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", doors.MetricsHandler())
	mux.Handle("/", doors)
	var h http.Handler = mux
	if verbose {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			mux.ServeHTTP(w, r)
			// The path names ids at most; the query and headers (the API
			// key) are never logged.
			log.Debug("http", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "dur", time.Since(start))
		})
	}
	// The timeouts and the connection cap are set by httpapi.API.LimitHTTP.
	return &http.Server{
		Handler:  h,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
