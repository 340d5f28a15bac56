package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

// ErrUploadStopped: ctx ended while the upload's body was being sent, and
// the rest was held back. The lane got part of the content only, so the
// device writes nothing: it verifies length and digest at commit (§3.4).
var ErrUploadStopped = errors.New("the upload was stopped before all of its content was sent, so nothing was written")

// Upload writes size bytes read from body, whose SHA-256 is sum, with the
// streamed write upload (POST /v1/devices/{id}/writes): the body is the raw
// content, so any size goes through in constant memory on both ends. It
// follows the answer's event stream as Instruct does, with the same
// errors, and ErrUploadStopped when ctx ended before the body was all
// sent (a Read of body that blocks holds that up: the transport waits
// for it). A body that ends before size bytes, or whose digest is not sum,
// fails the instruction and writes nothing.
func (c *Client) Upload(ctx context.Context, deviceID string, req api.UploadRequest, body io.Reader, size int64, sum protocol.Digest, sink Sink) (Result, error) {
	if size < 0 {
		return Result{}, fmt.Errorf("the upload's size %d is negative", size)
	}
	if !utf8.ValidString(req.Path) {
		return Result{}, &NotUTF8Error{Field: "path", Value: req.Path}
	}
	if err := notUTF8("expect", reflect.ValueOf(req.Expect)); err != nil {
		return Result{}, err
	}
	q, err := uploadQuery(req, sum)
	if err != nil {
		return Result{}, err
	}
	gb := &gatedBody{r: body, left: size}
	build := func(ctx context.Context) (*http.Request, error) {
		var rd io.Reader = http.NoBody // a zero ContentLength with a body would be sent chunked
		if size > 0 {
			rd = gb
		}
		r, err := c.newRequest(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/writes?"+q, rd)
		if err != nil {
			return nil, err
		}
		r.ContentLength = size
		r.Header.Set("Content-Type", "application/octet-stream")
		if size > 0 {
			// A refusal (a bad query, an unknown device) comes before the
			// body is sent.
			r.Header.Set("Expect", "100-continue")
		}
		return r, nil
	}
	res, err := c.stream(ctx, build, gb, sink)
	if rerr := gb.readErr(); err != nil && rerr != nil && !errors.Is(err, ErrUploadStopped) {
		return res, fmt.Errorf("reading the content to upload: %w; nothing was written", rerr)
	}
	return res, err
}

func uploadQuery(req api.UploadRequest, sum protocol.Digest) (string, error) {
	q := url.Values{}
	if req.Kind != "" {
		q.Set(api.UploadKind, string(req.Kind))
	}
	q.Set(api.UploadPath, req.Path)
	q.Set(api.UploadTimeoutMs, strconv.FormatInt(req.TimeoutMs, 10))
	q.Set(api.UploadSHA256, sum.String())
	if req.Expect != nil {
		b, err := json.Marshal(req.Expect)
		if err != nil {
			return "", err
		}
		q.Set(api.UploadExpect, string(b))
	}
	if req.RootSessionID != "" {
		q.Set(api.UploadRootSessionID, req.RootSessionID)
	}
	return q.Encode(), nil
}

// errStopped ends the body of an upload stopped by its ctx.
var errStopped = errors.New("the upload was stopped")

// gatedBody hands out exactly left bytes of r, until stop: after it, no
// byte more goes to the lane, so a body stopped short stays short. One
// goroutine reads it (the transport's); stop may come from another.
type gatedBody struct {
	mu      sync.Mutex
	r       io.Reader
	left    int64
	stopped bool
	err     error // the error of r, if it failed or ended early
}

func (g *gatedBody) Read(p []byte) (int, error) {
	g.mu.Lock()
	left, stopped, ferr := g.left, g.stopped, g.err
	g.mu.Unlock()
	switch {
	case left == 0:
		return 0, io.EOF
	case stopped:
		return 0, errStopped
	case ferr != nil:
		return 0, ferr
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	// Not under the lock: stop must not wait for a read that blocks.
	n, err := g.r.Read(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return 0, errStopped // what this read got never goes out
	}
	g.left -= int64(n)
	if err == io.EOF && g.left > 0 {
		err = fmt.Errorf("the content ended %s short of its size", words.Bytes(g.left))
	}
	if err != nil && err != io.EOF {
		g.err = err
		return n, err
	}
	if g.left == 0 {
		return n, io.EOF
	}
	return n, nil
}

// stop holds back the rest and reports whether all of it was sent already.
func (g *gatedBody) stop() (complete bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	return g.left == 0
}

func (g *gatedBody) readErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
