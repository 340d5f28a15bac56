package cluster

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"syscall"
	"time"
)

// Forwarder sends a request to the replica that holds the device and
// copies its answer back as it comes, byte for byte: the NDJSON stream is
// flushed line by line, a streamed upload's body is sent while the answer
// is read, and a caller hanging up cancels the forwarded request (so the
// holder cancels the instruction as for its own caller).
type Forwarder struct {
	hop       *Hop
	transport *http.Transport
	log       *slog.Logger
	// Refused answers a request that never reached the holder (nothing
	// was dispatched); Unknown one that reached it and failed before its
	// answer began (it may have run). After the answer began, a failure
	// breaks the caller's stream: the client sees no outcome.
	Refused, Unknown func(w http.ResponseWriter, r *http.Request, err error)
}

// NewForwarder makes a Forwarder that signs its hops with hop.
func NewForwarder(hop *Hop, logger *slog.Logger) *Forwarder {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &Forwarder{
		hop: hop,
		log: logger,
		transport: &http.Transport{
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // the answer's bytes pass as they are
		},
	}
}

// Close drops the idle connections to the other replicas.
func (f *Forwarder) Close() { f.transport.CloseIdleConnections() }

// Forward sends r to the replica reached at base and answers w with its
// answer; clientAddr is the caller's address, carried in the hop.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, base *url.URL, clientAddr string) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(p *httputil.ProxyRequest) {
			p.Out.URL.Scheme, p.Out.URL.Host = base.Scheme, base.Host
			p.Out.URL.Path, p.Out.URL.RawPath = joinPath(base.Path, p.In.URL.Path), ""
			p.Out.URL.RawQuery = p.In.URL.RawQuery
			p.Out.Host = base.Host
			// The front replica answered "100 Continue" when it read the
			// body; the holder must not be waited for again.
			p.Out.Header.Del("Expect")
			f.hop.Sign(p.Out, clientAddr)
		},
		Transport:     f.transport,
		FlushInterval: -1,
		ErrorLog:      log.New(slogWriter{f.log}, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if neverSent(err) {
				f.Refused(w, r, err)
				return
			}
			f.Unknown(w, r, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// neverSent reports whether err came before any byte of the request
// reached the holder: the connection could not be made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func joinPath(base, path string) string {
	if base == "" || base == "/" {
		return path
	}
	if base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + path
}

// slogWriter takes ReverseProxy's log lines (errors of a forward, never
// content) into the lane's logger.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn("lane: forwarding to another replica", "err", string(p))
	return len(p), nil
}

// Send makes one hop-signed request without a body to the replica at base
// and returns its status (the answer's body is read and dropped).
func (f *Forwarder) Send(ctx context.Context, base, method, path, authorization, clientAddr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", authorization)
	f.hop.Sign(req, clientAddr)
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// NothingListens reports whether err is a refused connection: the host
// answered that no process listens on the port, so a replica that
// advertised it is gone (its leases may be taken over at once).
func NothingListens(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
