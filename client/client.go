// Package client is a Go client of the lane's HTTP API (docs/api.md): the
// devices, enrollment tokens, instructions with their event stream and
// cancel, and the streamed write upload. It speaks the shapes of package
// api and prints nothing.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/tlshint"
)

// Client calls one lane with one API key. It is safe for concurrent use.
type Client struct {
	base string
	key  string
	hc   *http.Client
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (default:
// its own client on a clone of http.DefaultTransport that speaks HTTP/1.1).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the lane at baseURL (http:// or https://, with
// or without a trailing slash) that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	base := strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("the lane's URL %q: want an http:// or https:// URL", baseURL)
	}
	if apiKey == "" {
		return nil, errors.New("no API key")
	}
	c := &Client{base: base, key: apiKey}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: newTransport()}
	}
	return c, nil
}

// newTransport is a clone of http.DefaultTransport that speaks HTTP/1.1,
// also to a lane on https:// that offers HTTP/2: an instruction's stream
// then goes straight into the TLS connection, without HTTP/2's frames of
// 16 KiB, its flow-control windows and the server's frame-writing
// goroutine on the way. Through the real binaries over TLS, `sema run`
// moved output about a quarter faster so, with less CPU in all three
// processes (docs/performance.md). Concurrent requests take connections
// of their own.
//
// A clone of http.DefaultTransport once it has been used carries its
// HTTP/2 settings (the "h2" protocol offered in the TLS handshake), so
// they are taken out again; an empty TLSNextProto is net/http's documented
// way to turn HTTP/2 off.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if t.TLSClientConfig != nil {
		t.TLSClientConfig.NextProtos = slices.DeleteFunc(slices.Clone(t.TLSClientConfig.NextProtos), func(p string) bool { return p == "h2" })
	}
	return t
}

// BaseURL is the lane's URL without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// HTTPClient is the client the requests go through.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// Close drops the idle connections, so that no goroutine of the transport
// outlives the client's user.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Error is an error answer of the lane: nothing was queued, except when
// MayHaveRun. Code and Message are the body's errorCode and message; a
// body that is not the lane's error shape leaves Code empty and Message
// the body's text.
type Error struct {
	Status  int
	Code    string
	Message string
}

// MayHaveRun reports the one error answer after which the instruction
// may have run: the replica holding the device failed after a forwarded
// request reached it (api.CodeOutcomeUnknown). It is never retried.
func (e *Error) MayHaveRun() bool { return e.Code == api.CodeOutcomeUnknown }

func (e *Error) Error() string {
	if e.Code == "" {
		// A body that is only a status line ("404 page not found") does
		// not say its number twice.
		msg := strings.TrimPrefix(e.Message, strconv.Itoa(e.Status)+" ")
		return fmt.Sprintf("the lane answered %d: %s", e.Status, msg)
	}
	return e.Code + ": " + e.Message
}

// UnreachableError is a request that got no answer from the lane (the
// connection was refused, broke, or timed out before the answer's head).
// Sent says the request had been written whole when it broke: the lane
// may then have dispatched it (MayHaveRun).
type UnreachableError struct {
	URL  string
	Err  error
	Sent bool
}

func (e *UnreachableError) Error() string {
	if e.Sent {
		return fmt.Sprintf("the connection to the lane at %s broke after the request was sent, before any answer: %v", e.URL, e.Err)
	}
	if a := tlshint.Untrusted(e.Err); a != "" {
		return fmt.Sprintf("cannot reach the lane at %s: %v; %s", e.URL, e.Err, a)
	}
	return fmt.Sprintf("cannot reach the lane at %s: %v", e.URL, e.Err)
}

// MayHaveRun reports whether the lane may have dispatched the request.
func (e *UnreachableError) MayHaveRun() bool { return e.Sent }

func (e *UnreachableError) Unwrap() error { return e.Err }

// newRequest builds an authenticated request of path p.
func (c *Client) newRequest(ctx context.Context, method, p string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	return req, nil
}

// do sends req; an answer that is not 2xx is an *Error.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	var sent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) { sent.Store(w.Err == nil) },
	}))
	resp, err := c.hc.Do(req)
	if err != nil {
		if ue := errors.Unwrap(err); ue != nil { // drop url.Error's "Post URL:" prefix
			err = ue
		}
		return nil, &UnreachableError{URL: c.base, Err: err, Sent: sent.Load()}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

func readError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body api.Error
	if json.Unmarshal(b, &body) == nil && body.Code != "" {
		e.Code, e.Message = body.Code, body.Message
		return e
	}
	e.Message = strings.TrimSpace(string(b))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// jsonRequest sends body (nil: no body) as JSON.
func (c *Client) jsonRequest(ctx context.Context, method, p string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		if err := notUTF8("text", reflect.ValueOf(body)); err != nil {
			return nil, err
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, p, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.do(req)
}

// call does one JSON request and decodes the answer into out.
func (c *Client) call(ctx context.Context, method, p string, body, out any) error {
	resp, err := c.jsonRequest(ctx, method, p, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("the lane's answer to %s %s: %w", method, p, err)
	}
	return nil
}
