package mcp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/mcp"
)

// liveLane is a real lane (SQLite in a temp dir, over loopback HTTP) with a
// real executor connected to it: the tools act on real files and
// processes.
type liveLane struct {
	t        testing.TB
	srv      *lane.Server
	st       store.Store
	url      string
	apiKey   string
	deviceID string
	ws       string // the executor's workspace root
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startLiveLane(t testing.TB) *liveLane {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := lane.New(lane.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	t.Cleanup(hs.Close)
	_, apiKey, err := lane.CreateIdentity(ctx, st, "user")
	if err != nil {
		t.Fatal(err)
	}
	l := &liveLane{t: t, srv: srv, st: st, url: hs.URL, apiKey: apiKey}
	l.deviceID, l.ws = l.addDevice()
	return l
}

// addDevice enrolls another device of the lane's identity and serves it
// with a real executor until the test ends.
func (l *liveLane) addDevice() (deviceID, workspace string) {
	t := l.t
	t.Helper()
	token, err := lanetest.IssueToken(t.Context(), l.url, l.apiKey)
	if err != nil {
		t.Fatal(err)
	}
	dir, ws := t.TempDir(), t.TempDir()
	rec, err := device.Enroll(t.Context(), device.EnrollOptions{Server: l.url, Token: token, APIKey: l.apiKey, WorkspaceRoot: ws, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	key, err := device.LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := executor.New(executor.Config{DeviceID: rec.DeviceID, Key: key, Server: rec.Server, WorkspaceRoot: rec.WorkspaceRoot,
		Logger: quietLogger(), StatusPath: filepath.Join(dir, device.StatusFile)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	for deadline := time.Now().Add(30 * time.Second); !l.srv.Presence(rec.DeviceID).Online; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the device to come online")
		}
	}
	return rec.DeviceID, rec.WorkspaceRoot
}

// face connects an MCP client to one of the two faces.
type face struct {
	name    string
	connect func(l *liveLane, device, session string, opts *sdk.ClientOptions) *sdk.ClientSession
}

// faces are the two ways in: the server `sema mcp` runs (over the lane's
// HTTP API with client.Client; an in-memory pipe stands for its stdio) and
// the lane's own Streamable HTTP endpoint.
var faces = []face{
	{"stdio", func(l *liveLane, device, session string, opts *sdk.ClientOptions) *sdk.ClientSession {
		lc, err := client.New(l.url, l.apiKey)
		if err != nil {
			l.t.Fatal(err)
		}
		l.t.Cleanup(lc.Close)
		srv := mcp.NewServer(mcp.Options{Lane: lc, Device: device, Session: session})
		st, ct := sdk.NewInMemoryTransports()
		ss, err := srv.Connect(l.t.Context(), st, nil)
		if err != nil {
			l.t.Fatal(err)
		}
		l.t.Cleanup(func() { ss.Close() })
		return l.clientOn(ct, opts)
	}},
	{"http", func(l *liveLane, device, session string, opts *sdk.ClientOptions) *sdk.ClientSession {
		return l.clientOn(l.httpTransport(l.apiKey, device, session), opts)
	}},
}

func (l *liveLane) httpTransport(apiKey, device, session string) *sdk.StreamableClientTransport {
	u := l.url + lane.MCPPath + "?device=" + device
	if session != "" {
		u += "&session=" + session
	}
	return &sdk.StreamableClientTransport{Endpoint: u, HTTPClient: &http.Client{Transport: bearer{apiKey}}}
}

func (l *liveLane) clientOn(tr sdk.Transport, opts *sdk.ClientOptions) *sdk.ClientSession {
	l.t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, opts)
	cs, err := c.Connect(l.t.Context(), tr, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { cs.Close() })
	return cs
}

// bearer adds the API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}
