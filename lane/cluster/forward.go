package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
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
	transport *http.Transport // forwards whose body streams (ReverseProxy)
	conns     *connPool       // forwards whose body is held whole (exchange.go)
	log       *slog.Logger
	// Unknown answers a request that reached the holder and failed before
	// its answer began (it may have run). After the answer began, a
	// failure breaks the caller's stream: the client sees no outcome.
	Unknown func(w http.ResponseWriter, r *http.Request, err error)
	// Answering, when set, is called as the holder's answer to a forward
	// begins, before the caller has any of it.
	Answering func()
}

func (f *Forwarder) answering() {
	if f.Answering != nil {
		f.Answering()
	}
}

// Outcome is what became of a forward.
type Outcome int

const (
	// Answered: the holder's answer (or Unknown's, or a broken stream)
	// went to the caller.
	Answered Outcome = iota
	// Unreached: no byte of the request reached the holder; the caller
	// was not answered, and nothing was dispatched.
	Unreached
	// Misdirected: the replica does not hold the device's connection and
	// sent the request back unread (421 with HeaderMisdirected); the
	// caller was not answered, and nothing was dispatched.
	Misdirected
)

// HeaderMisdirected marks a replica's 421 to a forwarded request for a
// device whose connection it does not hold: it read nothing of the
// request's body and dispatched nothing.
const HeaderMisdirected = "Sema-Replica-Misdirected"

var errMisdirected = errors.New("cluster: the replica does not hold the device's connection")

// NewForwarder makes a Forwarder that signs its hops with hop.
func NewForwarder(hop *Hop, logger *slog.Logger) *Forwarder {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &Forwarder{
		hop:   hop,
		log:   logger,
		conns: newConnPool(),
		transport: &http.Transport{
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // the answer's bytes pass as they are
			// A stream's lines are read and written in large pieces: with
			// the 4 KiB defaults a forwarded 1 GiB stream costs the
			// forwarding replica a read call per 4 KiB.
			ReadBufferSize:  copyBuffer,
			WriteBufferSize: copyBuffer,
		},
	}
}

// copyBuffer is the size of the buffers a forward's bytes pass through.
const copyBuffer = 64 << 10

// buffers are the copy buffers of the forwards in progress.
var buffers = &bufferPool{sync.Pool{New: func() any { b := make([]byte, copyBuffer); return &b }}}

// bufferPool is httputil.BufferPool on a sync.Pool.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(p []byte) { b.p.Put(&p) }

// Close drops the idle connections to the other replicas.
func (f *Forwarder) Close() {
	f.transport.CloseIdleConnections()
	f.conns.closeIdle()
}

// Forward sends r to the replica reached at base and answers w with its
// answer; clientAddr is the caller's address, carried in the hop. body,
// when not nil, is r's body read whole (r.Body is then not read); else
// r.Body is sent as it arrives. When it returns Unreached or Misdirected,
// w is untouched and the request may be routed again.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, base *url.URL, clientAddr string, body []byte) Outcome {
	if body != nil {
		return f.exchange(w, r, base, clientAddr, body)
	}
	outcome := Answered
	rp := &httputil.ReverseProxy{
		Rewrite: func(p *httputil.ProxyRequest) {
			p.Out.URL.Scheme, p.Out.URL.Host = base.Scheme, base.Host
			p.Out.URL.Path, p.Out.URL.RawPath = joinPath(base.Path, p.In.URL.Path), ""
			p.Out.URL.RawQuery = p.In.URL.RawQuery
			p.Out.Host = base.Host
			// The front replica answered "100 Continue" when it read the
			// body; the holder must not be waited for again.
			p.Out.Header.Del("Expect")
			f.hop.Sign(p.Out, clientAddr, nil) // sent as it arrives
		},
		Transport:     f.transport,
		FlushInterval: -1,
		BufferPool:    buffers,
		ErrorLog:      log.New(slogWriter{f.log}, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get(HeaderMisdirected) != "" {
				return errMisdirected
			}
			f.answering()
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			switch {
			case errors.Is(err, errMisdirected):
				outcome = Misdirected
			case neverSent(err):
				outcome = Unreached
			default:
				f.Unknown(w, r, err)
			}
		},
	}
	rp.ServeHTTP(w, r)
	return outcome
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
	f.hop.Sign(req, clientAddr, []byte{})
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Ask makes one hop-signed POST of a JSON body to the replica at base
// and returns the answer's body, at most limit bytes, when its status is
// 200. It is for what replicas ask each other, never a caller's request.
func (f *Forwarder) Ask(ctx context.Context, base, path string, body []byte, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	f.hop.Sign(req, "", body)
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cluster: %s answered %s", base, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("cluster: %s answered more than %d bytes", base, limit)
	}
	return b, err
}

// NothingListens reports whether err is a refused connection: the host
// answered that no process listens on the port, so a replica that
// advertised it is gone (its leases may be taken over at once).
func NothingListens(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
