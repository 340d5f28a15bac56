// Package inproc is an http.RoundTripper that serves requests with an
// http.Handler in the same process, streaming: the response's head returns
// as soon as the handler writes it (or flushes, or returns), its body is a
// pipe the handler writes into as the client reads, and closing the body
// ends the handler's request context, as a client hanging up would. The
// lane's own MCP face uses it to call the lane's HTTP API without a socket,
// so that every rule of that API (authentication, refusals, session
// binding, content budget) applies to it unchanged.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Transport serves every request with Handler.
type Transport struct {
	Handler http.Handler
	// RemoteAddr is the handler's r.RemoteAddr; "" is "in-process".
	RemoteAddr string
}

// ErrHandlerPanicked ends a body whose handler panicked.
var ErrHandlerPanicked = errors.New("inproc: the handler panicked")

// RoundTrip runs the handler on its own goroutine and returns once it has
// written the response's head.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = t.RemoteAddr
	if sreq.RemoteAddr == "" {
		sreq.RemoteAddr = "in-process"
	}
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, body: pw, head: make(chan struct{})}
	go t.serve(w, sreq, pw)
	select {
	case <-w.head:
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	resp := &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &body{PipeReader: pr, cancel: cancel}, ContentLength: -1, Request: req,
	}
	return resp, nil
}

// serve runs the handler; its end (or panic) ends the body.
func (t Transport) serve(w *responseWriter, r *http.Request, pw *io.PipeWriter) {
	defer func() {
		if p := recover(); p != nil {
			w.writeHead(http.StatusInternalServerError)
			pw.CloseWithError(fmt.Errorf("%w: %v", ErrHandlerPanicked, p))
			return
		}
		w.writeHead(http.StatusOK)
		pw.Close()
	}()
	t.Handler.ServeHTTP(w, r)
}

// body is the response body: closing it ends the handler's request.
type body struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// responseWriter is the handler's side.
type responseWriter struct {
	header http.Header
	body   *io.PipeWriter

	once   sync.Once
	head   chan struct{} // closed once status and sent are set
	status int
	sent   http.Header
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) { w.writeHead(status) }

func (w *responseWriter) writeHead(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.head)
	})
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.writeHead(http.StatusOK)
	return w.body.Write(p)
}

// Flush sends the head; the body has no buffer to flush (a write returns
// once the client has read it).
func (w *responseWriter) Flush() { w.writeHead(http.StatusOK) }
