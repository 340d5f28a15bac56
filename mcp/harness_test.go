package mcp_test

import (
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/livelane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/mcp"
)

// liveLane is a real lane (SQLite in a temp dir, over loopback HTTP) with a
// real executor connected to it: the tools act on real files and
// processes.
type liveLane struct {
	t        testing.TB
	live     *livelane.Lane
	url      string
	apiKey   string
	deviceID string
	ws       string // the executor's workspace root
}

func startLiveLane(t testing.TB) *liveLane {
	t.Helper()
	live := livelane.Start(t, nil)
	d := live.AddDevice()
	return &liveLane{t: t, live: live, url: live.URL, apiKey: live.APIKey, deviceID: d.ID, ws: d.Workspace}
}

// addDevice enrolls another device of the lane's identity and serves it
// with a real executor until the test ends.
func (l *liveLane) addDevice() (deviceID, workspace string) {
	d := l.live.AddDevice()
	return d.ID, d.Workspace
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
	u := l.url + httpapi.MCPPath + "?device=" + device
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
