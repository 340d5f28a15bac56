package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
	"github.com/spf13/cobra"
)

// This file is the user side's HTTP client of the lane (docs/api.md): the
// flags every user command shares, the JSON calls, and the NDJSON stream
// of an instruction with its cancel. It prints nothing; the commands do.

// Environment of the user commands.
const (
	EnvServer = "SEMA_SERVER" // the lane's base URL
	EnvDevice = "SEMA_DEVICE" // the default device of run and fs
	// DefaultServer is where `sema server` listens by default.
	DefaultServer = "http://127.0.0.1:8420"
)

// Exit codes of run and fs besides the remote command's own (see run.go).
const (
	ExitTimeout      = 124 // the device killed the command at --timeout
	ExitNeverStarted = 125 // the lane refused it or it never started: nothing ran, safe to retry
	ExitCancelled    = 130 // Ctrl-C: the device confirmed the command was stopped (128 + SIGINT)
	// ExitLaneCancelled: the lane itself cancelled the command (its output
	// outran the pending-delivery bound, §4); the output is incomplete.
	ExitLaneCancelled = 254
	ExitLaneFailure   = 255 // any other failure; the command may have run (outcome_unknown, a broken stream)
)

// clientFlags are the flags of every command that talks to the lane as a
// user.
type clientFlags struct {
	server  string
	keyFile string
}

func addClientFlags(c *cobra.Command, f *clientFlags) {
	addServerFlag(c, &f.server)
	c.Flags().StringVar(&f.keyFile, "admin-key-file", "", "read the API key from this file (e.g. <data>/admin.key) instead of $"+EnvAPIKey)
}

// addServerFlag is --server, the lane's base URL, as every command that
// talks to the lane takes it.
func addServerFlag(c *cobra.Command, server *string) {
	def := os.Getenv(EnvServer)
	if def == "" {
		def = DefaultServer
	}
	c.Flags().StringVar(server, "server", def, "the lane's base URL (default $"+EnvServer+", else "+DefaultServer+")")
}

// apiClient calls the lane's HTTP API with the user's API key.
type apiClient struct {
	base string
	key  string
	hc   *http.Client
}

func (f clientFlags) client() (*apiClient, error) {
	base := strings.TrimRight(f.server, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, usageError{fmt.Errorf("--server %q: want an http:// or https:// URL", f.server)}
	}
	key := os.Getenv(EnvAPIKey)
	if f.keyFile != "" {
		b, err := os.ReadFile(f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("reading the API key: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		return nil, usageError{fmt.Errorf("no API key: set $%s, or pass --admin-key-file <data>/admin.key on the server's machine", EnvAPIKey)}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &apiClient{base: base, key: key, hc: &http.Client{Transport: tr}}, nil
}

// close drops the idle connections: no goroutine outlives a command.
func (c *apiClient) close() { c.hc.CloseIdleConnections() }

// laneError is an error answer of the lane: {"errorCode", "message"}.
type laneError struct {
	Status  int    `json:"-"`
	Code    string `json:"errorCode"`
	Message string `json:"message"`
}

func (e *laneError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the lane answered %d %s", e.Status, e.Message)
	}
	return e.Code + ": " + e.Message
}

func (c *apiClient) request(ctx context.Context, method, p string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the lane at %s: %w", c.base, errors.Unwrap(err))
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		le := &laneError{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, le) != nil || le.Code == "" {
			le.Code, le.Message = "", strings.TrimSpace(string(b))
			if le.Message == "" {
				le.Message = http.StatusText(resp.StatusCode)
			}
		}
		return nil, le
	}
	return resp, nil
}

// call does one JSON request and decodes the answer into out (if not nil).
func (c *apiClient) call(ctx context.Context, method, p string, body, out any) error {
	resp, err := c.request(ctx, method, p, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("the lane's answer to %s %s: %w", method, p, err)
	}
	return nil
}

// deviceInfo is one device of GET /v1/devices.
type deviceInfo struct {
	DeviceID       string `json:"deviceId"`
	DisplayName    string `json:"displayName"`
	PlatformOS     string `json:"platformOs"`
	PlatformArch   string `json:"platformArch"`
	WorkspaceRoot  string `json:"workspaceRoot"`
	CreatedAt      string `json:"createdAt"`
	Revoked        bool   `json:"revoked"`
	RevokedAt      string `json:"revokedAt"`
	Online         bool   `json:"online"`
	Gen            string `json:"gen"`
	ConnectedSince string `json:"connectedSince"`
	Inflight       int    `json:"inflight"`
}

func (c *apiClient) devices(ctx context.Context) ([]deviceInfo, error) {
	var out struct {
		Devices []deviceInfo `json:"devices"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/devices", nil, &out)
	return out.Devices, err
}

// pickDevice resolves the device of run and fs: --device, else
// $SEMA_DEVICE, else the caller's only device that is not revoked.
func (c *apiClient) pickDevice(ctx context.Context, id string) (deviceInfo, error) {
	if id == "" {
		id = os.Getenv(EnvDevice)
	}
	devs, err := c.devices(ctx)
	if err != nil {
		return deviceInfo{}, &ExitError{Code: ExitNeverStarted, Err: err} // nothing was sent
	}
	var live []deviceInfo
	for _, d := range devs {
		if id != "" && d.DeviceID == id {
			return d, nil
		}
		if !d.Revoked {
			live = append(live, d)
		}
	}
	switch {
	case id != "":
		return deviceInfo{}, &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("you have no device %q (see `sema devices`)", id)}
	case len(live) == 1:
		return live[0], nil
	case len(live) == 0:
		return deviceInfo{}, &ExitError{Code: ExitNeverStarted, Err: errors.New("you have no enrolled device: run `sema token` and enroll one")}
	}
	return deviceInfo{}, usageError{fmt.Errorf("you have %d devices: pass --device ID (see `sema devices`)", len(live))}
}

// remotePath makes p absolute on the device: the lane takes absolute,
// normalized POSIX paths only, so a relative one is joined to the device's
// workspace root (as the lane's sessions resolve them), never expanded.
func remotePath(dev deviceInfo, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = path.Join(dev.WorkspaceRoot, p)
	}
	return path.Clean(p)
}

// instruction is the body of POST /v1/devices/{id}/instructions.
type instruction struct {
	Kind       string  `json:"kind"`
	Args       any     `json:"args"`
	Cwd        string  `json:"cwd,omitempty"`
	TimeoutMs  int64   `json:"timeoutMs"`
	ContentB64 *string `json:"contentB64,omitempty"`
}

// fileInfo is WireFileInfo.
type fileInfo struct {
	Path    string  `json:"path"`
	Kind    string  `json:"kind"`
	Size    int64   `json:"size"`
	MtimeMs int64   `json:"mtimeMs"`
	Mode    *uint32 `json:"mode"`
}

// outcome is any arm of an outcome (§3.3), flattened.
type outcome struct {
	OK            bool   `json:"ok"`
	Kind          string `json:"kind"`
	ExitCode      *int   `json:"exitCode"`
	Truncated     *struct{ Stdout, Stderr bool }
	ErrorCode     string     `json:"errorCode"`
	Message       string     `json:"message"`
	State         string     `json:"state"` // the cancel receipt's
	Info          *fileInfo  `json:"info"`
	Entries       []fileInfo `json:"entries"`
	ExistsValue   *bool      `json:"existsValue"`
	CanonicalPath string     `json:"canonicalPath"`
	Inode         string     `json:"inode"`
	Created       *bool      `json:"created"`
}

// result is how an instruction ended.
type result struct {
	ID      string
	State   string // terminal or terminal_never_started
	Outcome outcome
	// Interrupted: ctx ended during the call and a cancel was sent.
	Interrupted bool
	// LaneCancelled: the lane cancelled it on its own (cancelledBy "lane").
	LaneCancelled bool
}

// chunkSink takes a stream's chunks in order: kind stdout, stderr or data;
// data is valid only during the call (the reader reuses it).
type chunkSink func(kind string, data []byte) error

// cancelWait bounds the wait for an outcome after a cancel: the lane
// settles a cancelled instruction within its cancel grace (10 s by
// default), so this is generous.
const cancelWait = 30 * time.Second

// instruct posts an instruction and follows its stream to the outcome,
// handing chunks to sink as they come. When ctx ends first (Ctrl-C), it
// posts the cancel and keeps reading until the lane settles the
// instruction, at most cancelWait. An error means the outcome is not known.
func (c *apiClient) instruct(ctx context.Context, deviceID string, in instruction, sink chunkSink) (result, error) {
	var res result
	if err := ctx.Err(); err != nil {
		return res, &ExitError{Code: ExitCancelled, Err: errors.New("cancelled before it was sent")}
	}
	// The stream must outlive ctx: a Ctrl-C cancels the instruction on the
	// lane, and its outcome still comes down this response.
	streamCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	resp, err := c.request(streamCtx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/instructions", in)
	if err != nil {
		var le *laneError
		if errors.As(err, &le) {
			return res, &ExitError{Code: ExitNeverStarted, Err: err}
		}
		return res, &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("%w (nothing was sent)", err)}
	}
	defer resp.Body.Close()

	var (
		mu          sync.Mutex
		id          string
		interrupted bool
	)
	idKnown := make(chan struct{})
	finished := make(chan struct{})
	watcher := make(chan struct{})
	go func() { // Ctrl-C → cancel, then a bounded wait for the outcome
		defer close(watcher)
		select {
		case <-finished:
			return
		case <-ctx.Done():
		}
		mu.Lock()
		interrupted = true
		mu.Unlock()
		select {
		case <-finished:
			return
		case <-idKnown:
		}
		mu.Lock()
		target := id
		mu.Unlock()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := c.call(cctx, http.MethodPost, "/v1/instructions/"+url.PathEscape(target)+"/cancel", struct{}{}, nil)
		cancel()
		if err != nil {
			abort() // closing the stream cancels it too
			return
		}
		t := time.NewTimer(cancelWait)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			abort()
		}
	}()
	defer func() {
		close(finished)
		<-watcher
	}()

	// Leaving early closes the stream, which cancels the instruction; what
	// it did so far is unknown.
	broken := func(format string, args ...any) error {
		return &ExitError{Code: ExitLaneFailure, Err: fmt.Errorf(format+"; instruction %s may have run", append(args, res.ID)...)}
	}
	events := api.NewEventReader(resp.Body)
	for {
		ev, err := events.Next()
		if errors.Is(err, api.ErrBadEvent) {
			return res, broken("%v", err)
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return res, broken("the lane's stream ended before the outcome (%v)", err)
		}
		switch ev.Event {
		case api.EventAccepted:
			if res.ID != "" {
				return res, broken("a second accepted event in the lane's stream")
			}
			mu.Lock()
			id, res.ID = ev.InstructionID, ev.InstructionID
			mu.Unlock()
			close(idKnown)
		case api.EventChunk:
			if ev.Kind == protocol.ChunkExit || ev.Data == nil {
				continue // the exit code comes again in the outcome
			}
			if err := sink(string(ev.Kind), ev.Data); err != nil {
				return res, broken("%v", err)
			}
		case api.EventOutcome:
			res.State, res.LaneCancelled = string(ev.State), ev.CancelledBy == "lane"
			if err := json.Unmarshal(ev.Outcome, &res.Outcome); err != nil {
				return res, broken("a bad outcome in the lane's stream: %v", err)
			}
			mu.Lock()
			res.Interrupted = interrupted
			mu.Unlock()
			return res, nil
		default:
			return res, broken("an unknown event %q in the lane's stream", ev.Event)
		}
	}
}

// neverStarted reports an outcome that proves the work never started.
func (r result) neverStarted() bool {
	if r.State == "terminal_never_started" {
		return true
	}
	switch r.Outcome.ErrorCode {
	case "target_unavailable", "shell_unavailable", "spawn_error", "not_supported":
		return true
	}
	return false
}

// failure turns an outcome that is not the verb's success into an exit
// (nil for a success arm of wantKind): 130 cancelled, 125 never started,
// 124 timeout, 1 a definite answer of the device (not_found,
// permission_denied …: nothing changed), 255 anything else (the work may
// have run: outcome_unknown and the like).
func (r result) failure(wantKind string) error {
	o := r.Outcome
	fail := func(code int, format string, args ...any) error {
		return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case r.LaneCancelled:
		// Not the user's Ctrl-C: 130 stays theirs alone. The message starts
		// "the lane cancelled the command: …".
		return fail(ExitLaneCancelled, "%s", o.Message)
	case o.OK && o.Kind == "cancelled":
		return fail(ExitCancelled, "cancelled (%s)", o.State)
	case o.OK && o.Kind == wantKind:
		return nil
	case o.OK:
		return fail(ExitLaneFailure, "an unexpected %q outcome", o.Kind)
	case r.neverStarted():
		return fail(ExitNeverStarted, "%s: %s (it never started)", o.ErrorCode, o.Message)
	}
	switch o.ErrorCode {
	case "timeout":
		return fail(ExitTimeout, "%s: %s", o.ErrorCode, o.Message)
	case "aborted":
		if r.Interrupted {
			return fail(ExitCancelled, "%s: %s", o.ErrorCode, o.Message)
		}
	case "not_found", "is_directory", "not_directory", "permission_denied", "already_exists", "invalid", "precondition_failed":
		return fail(ExitFailure, "%s: %s", o.ErrorCode, o.Message)
	}
	return fail(ExitLaneFailure, "%s: %s", o.ErrorCode, o.Message)
}
