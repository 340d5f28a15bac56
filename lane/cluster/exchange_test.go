package cluster

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// wholeFront forwards each request to holder with its body held whole.
func wholeFront(t *testing.T, holder string) (*httptest.Server, *Forwarder) {
	t.Helper()
	hop := newTestHop(t, testSecret, "rep_A", &fixedClock{time.Now()})
	f := NewForwarder(hop, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(f.Close)
	f.Unknown = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(502) }
	base, err := url.Parse(holder)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held, _ := io.ReadAll(r.Body)
		if f.Forward(w, r, base, "192.0.2.7", held) != Answered {
			w.WriteHeader(503)
		}
	}))
	t.Cleanup(front.Close)
	return front, f
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/devices/dev_X/instructions?x=1", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer caller-key")
	req.Header.Set("Keep-Alive", "timeout=5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An exchange carries the request as the holder must see it: the caller's
// Authorization and body, the path and query, a hop the holder verifies
// naming the caller's address, and no header of the caller's connection.
// Its answer comes back whole, and the connection is kept for the next.
func TestAnExchangeCarriesTheRequestAndKeepsItsConnection(t *testing.T) {
	verifier := newTestHop(t, testSecret, "rep_B", &fixedClock{time.Now()})
	var mu sync.Mutex
	peers := map[string]bool{}
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peers[r.RemoteAddr] = true
		mu.Unlock()
		fwd, err := verifier.Verify(r)
		body, _ := io.ReadAll(r.Body)
		switch {
		case err != nil || fwd.From != "rep_A" || fwd.ClientAddr != "192.0.2.7":
			t.Errorf("hop %+v, %v", fwd, err)
		case r.Header.Get("Authorization") != "Bearer caller-key" || r.Header.Get("Keep-Alive") != "":
			t.Errorf("headers %v", r.Header)
		case r.URL.RequestURI() != "/v1/devices/dev_X/instructions?x=1" || string(body) != `{"kind":"exec"}`:
			t.Errorf("request %s %q", r.URL.RequestURI(), body)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, "{\"event\":\"accepted\"}\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "{\"event\":\"outcome\"}\n")
	}))
	defer holder.Close()
	front, _ := wholeFront(t, holder.URL)
	for range 3 {
		if status, body := post(t, front.URL, `{"kind":"exec"}`); status != 200 || body != "{\"event\":\"accepted\"}\n{\"event\":\"outcome\"}\n" {
			t.Fatalf("status %d, body %q", status, body)
		}
	}
	if len(peers) != 1 {
		t.Fatalf("three exchanges came over %d connections; want one kept", len(peers))
	}
}

// A kept connection the holder has closed meanwhile is never written to:
// the next exchange dials afresh and is answered, not reported as a
// request that may have run.
func TestAKeptConnectionTheHolderClosedIsNotUsed(t *testing.T) {
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer holder.Close()
	front, f := wholeFront(t, holder.URL)
	if status, _ := post(t, front.URL, "{}"); status != 200 {
		t.Fatalf("first: %d", status)
	}
	holder.CloseClientConnections()
	// The holder's close reaches the kept connection's socket.
	eventually(t, "the kept connection to see its end", func() bool {
		f.conns.mu.Lock()
		defer f.conns.mu.Unlock()
		for _, list := range f.conns.idle {
			for _, c := range list {
				if alive(c.tcp) {
					return false
				}
			}
		}
		return true
	})
	if status, body := post(t, front.URL, "{}"); status != 200 || body != "ok" {
		t.Fatalf("after the holder closed the kept connection: %d %q; want its answer", status, body)
	}
}

// A caller hanging up ends the holder's request: the holder cancels the
// instruction, as for its own caller.
func TestACallerHangingUpEndsTheExchange(t *testing.T) {
	ended := make(chan struct{})
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "{\"event\":\"accepted\"}\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	}))
	defer holder.Close()
	front, _ := wholeFront(t, holder.URL)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", front.URL+"/v1/devices/dev_X/instructions", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 21)
	if _, err := io.ReadFull(resp.Body, line); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		holder.CloseClientConnections() // or Close would wait for the handler forever
		t.Fatal("the holder's request did not end after the caller hung up")
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
