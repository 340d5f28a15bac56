// Package livelane starts, for a test, a real lane (SQLite in a temp dir,
// over loopback HTTP) and real executors connected to it, each enrolled
// through the lane's HTTP API: what the tests of several packages (the
// executor's uploads, the MCP face) run their instructions against.
package livelane

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// Lane is a running lane and the identity the tests act as.
type Lane struct {
	Srv    *lane.Server
	Store  store.Store
	URL    string
	APIKey string
	tb     testing.TB
	log    *slog.Logger
}

// Device is an enrolled device served by a real executor until the test
// ends. Done receives Run's return; a test that takes it puts it back.
type Device struct {
	ID        string
	Workspace string
	Done      chan error
}

// Start starts a lane and creates its identity; log is for the lane and
// the executors (nil: discarded). Everything stops when the test ends.
func Start(tb testing.TB, log *slog.Logger) *Lane {
	tb.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx := tb.Context()
	st, err := sqlite.Open(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	srv, err := lane.New(lane.Config{Store: st, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(srv))
	tb.Cleanup(func() { srv.Shutdown(context.Background()) })
	tb.Cleanup(hs.Close)
	_, apiKey, err := lane.CreateIdentity(ctx, st, "user")
	if err != nil {
		tb.Fatal(err)
	}
	return &Lane{Srv: srv, Store: st, URL: hs.URL, APIKey: apiKey, tb: tb, log: log}
}

// AddDevice enrolls a device with a token the lane issues over HTTP and
// serves it with a real executor; it returns once the device is online.
func (l *Lane) AddDevice() Device { return l.AddNamedDevice("") }

// AddNamedDevice is AddDevice for a device with a name.
func (l *Lane) AddNamedDevice(name string) Device {
	tb := l.tb
	tb.Helper()
	ctx := tb.Context()
	token, err := lanetest.IssueToken(ctx, l.URL, l.APIKey)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	rec, err := device.Enroll(ctx, device.EnrollOptions{Server: l.URL, Token: token, APIKey: l.APIKey, WorkspaceRoot: tb.TempDir(), StateDir: dir, DisplayName: name})
	if err != nil {
		tb.Fatal(err)
	}
	key, err := device.LoadKey(dir)
	if err != nil {
		tb.Fatal(err)
	}
	rt, err := executor.New(executor.Config{DeviceID: rec.DeviceID, Key: key, Server: rec.Server, WorkspaceRoot: rec.WorkspaceRoot,
		Logger: l.log, StatusPath: filepath.Join(dir, device.StatusFile)})
	if err != nil {
		tb.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	tb.Cleanup(func() { stop(); <-done })
	l.WaitFor("the device to come online", func() bool { return l.Srv.Presence(rec.DeviceID).Online })
	return Device{ID: rec.DeviceID, Workspace: rec.WorkspaceRoot, Done: done}
}

// WaitFor polls cond until it holds, failing the test after 30 s.
func (l *Lane) WaitFor(what string, cond func() bool) {
	l.tb.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			l.tb.Fatalf("timed out waiting for %s", what)
		}
	}
}
