// Package bench measures the device lane end to end — the real lane server
// and the real executor over loopback — against local baselines measured in
// the same run: a local stat, a local `sh -c`, a local pipe, a local copy,
// and ssh over loopback (one multiplexed connection) where an sshd answers. `go test -bench . ./bench` runs the pairs;
// `go run ./bench/ratios` prints them side by side as ratios.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/sema-agent/sema/internal/lanetest"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

// Rig is a lane server and one enrolled executor connected to it.
type Rig struct {
	Lane      *lane.Server
	DeviceID  string
	Workspace string
	URL       string // the lane's HTTP API
	APIKey    string // an admin key of the lane's identity
	cleanup   []func()
}

// NewRig starts a lane on a fresh SQLite store and an executor enrolled
// into it, and waits until the device is online.
func NewRig(ctx context.Context) (*Rig, error) {
	r := &Rig{}
	fail := func(err error) (*Rig, error) { r.Close(); return nil, err }
	dir, err := os.MkdirTemp("", "sema-bench-")
	if err != nil {
		return nil, err
	}
	r.cleanup = append(r.cleanup, func() { os.RemoveAll(dir) })
	st, err := sqlite.Open(ctx, filepath.Join(dir, "lane"))
	if err != nil {
		return fail(err)
	}
	r.cleanup = append(r.cleanup, func() { st.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := lane.New(lane.Config{Store: st, Logger: quiet, MaxInflight: 16})
	if err != nil {
		return fail(err)
	}
	r.Lane = srv
	hs := httptest.NewServer(httpapi.New(srv))
	r.cleanup = append(r.cleanup, hs.Close, func() { srv.Shutdown(context.Background()) })
	_, apiKey, err := lane.CreateIdentity(ctx, st, "bench")
	if err != nil {
		return fail(err)
	}
	r.URL, r.APIKey = hs.URL, apiKey
	token, err := lanetest.IssueToken(ctx, hs.URL, apiKey)
	if err != nil {
		return fail(err)
	}
	r.Workspace = filepath.Join(dir, "workspace")
	if err := os.MkdirAll(r.Workspace, 0o700); err != nil {
		return fail(err)
	}
	stateDir := filepath.Join(dir, "device")
	rec, err := device.Enroll(ctx, device.EnrollOptions{Server: hs.URL, Token: token, APIKey: apiKey, WorkspaceRoot: r.Workspace, StateDir: stateDir})
	if err != nil {
		return fail(err)
	}
	r.DeviceID = rec.DeviceID
	key, err := device.LoadKey(stateDir)
	if err != nil {
		return fail(err)
	}
	rt, err := executor.New(executor.Config{DeviceID: rec.DeviceID, Key: key, Server: rec.Server, WorkspaceRoot: r.Workspace, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	r.cleanup = append(r.cleanup, func() { stop(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for !srv.Presence(rec.DeviceID).Online {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("bench: the device never came online"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r, nil
}

// Close stops everything NewRig started, in reverse order.
func (r *Rig) Close() {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
	r.cleanup = nil
}

// Run dispatches one instruction and drains it: it returns the bytes of
// output received and the outcome, or an error if it did not succeed (a
// cancellation, e.g. by the lane's delivery bound, is not success).
func (r *Rig) Run(ctx context.Context, in lane.Instruction) (int64, protocol.Outcome, error) {
	call, err := r.Lane.Dispatch(ctx, r.DeviceID, in)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	for {
		ev, err := call.Next(ctx)
		if err != nil {
			return n, nil, err
		}
		if ev.Settled != nil {
			o := ev.Settled.Outcome
			if !o.OK() || o.Kind() == protocol.OutcomeCancelled || call.Err() != nil {
				return n, o, fmt.Errorf("bench: %v (%v)", o, call.Err())
			}
			return n, o, nil
		}
		n += int64(len(ev.Chunk.Data))
	}
}
