package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// testAPI is the HTTP API over a real lane on a real SQLite file, served
// by a real HTTP server.
type testAPI struct {
	*API
	t   testing.TB
	url string
}

func newTestAPI(t testing.TB, mutate ...func(*lane.Config)) *testAPI {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := lane.Config{Store: st, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := lane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	a := &testAPI{API: New(srv), t: t}
	hs := httptest.NewServer(a)
	t.Cleanup(hs.Close)
	a.url = hs.URL
	return a
}

// user creates an identity and returns its API key.
func (a *testAPI) user(name string) (store.Identity, string) {
	a.t.Helper()
	idn, key, err := lane.CreateIdentity(a.t.Context(), a.store, name)
	if err != nil {
		a.t.Fatal(err)
	}
	return idn, key
}

// do sends a request with apiKey and returns the answer, read whole.
func (a *testAPI) do(method, path, apiKey, body string) (*http.Response, []byte) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
