package cluster

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// forwardWays are the two ways a request is forwarded: with its body held
// whole (an exchange on a kept connection) or streamed (ReverseProxy).
var forwardWays = []struct {
	name  string
	whole bool
}{{"body held whole", true}, {"body streamed", false}}

// forwardTo forwards one POST to base and returns what the caller got and
// which of the forwarder's error answers ran; whole: its body held whole.
func forwardTo(t *testing.T, base string, whole bool) (status int, body string, answered string) {
	t.Helper()
	hop := newTestHop(t, testSecret, "rep_A", &fixedClock{time.Now()})
	f := NewForwarder(hop, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer f.Close()
	f.Unknown = func(w http.ResponseWriter, _ *http.Request, _ error) { answered = "unknown"; w.WriteHeader(502) }
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var held []byte
		if whole {
			held, _ = io.ReadAll(r.Body)
		}
		switch f.Forward(w, r, u, "192.0.2.7", held) {
		case Unreached:
			answered = "unreached"
			w.WriteHeader(503)
		case Misdirected:
			answered = "misdirected"
			w.WriteHeader(503)
		}
	}))
	defer front.Close()
	resp, err := http.Post(front.URL+"/v1/devices/dev_X/instructions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		body = "broken: " + err.Error()
	} else {
		body = string(b)
	}
	return resp.StatusCode, body, answered
}

// A holder that cannot be reached got nothing: the forward says so
// and leaves the caller's answer to the lane.
func TestAForwardThatNeverReachedTheHolderIsUnreached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for _, way := range forwardWays {
		if status, _, answered := forwardTo(t, "http://"+addr, way.whole); status != 503 || answered != "unreached" {
			t.Errorf("%s: status %d, answered %q; want Unreached", way.name, status, answered)
		}
	}
}

// A replica that does not hold the device sends the request back
// unread (421 with HeaderMisdirected): the forward says so and the caller
// is not answered, so the lane may route the request again. A 421 without
// the header is an answer like any other.
func TestAMisdirectedForwardIsNotAnswered(t *testing.T) {
	for _, way := range forwardWays {
		for _, marked := range []bool{true, false} {
			holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if marked {
					w.Header().Set(HeaderMisdirected, "1")
				}
				w.WriteHeader(http.StatusMisdirectedRequest)
				w.Write([]byte("not here"))
			}))
			status, body, answered := forwardTo(t, holder.URL, way.whole)
			holder.Close()
			switch {
			case marked && (status != 503 || answered != "misdirected"):
				t.Errorf("%s, marked: status %d, answered %q; want Misdirected and the caller left to the lane", way.name, status, answered)
			case !marked && (status != 421 || answered != "" || body != "not here"):
				t.Errorf("%s, unmarked: status %d, answered %q, body %q; want the holder's 421 passed through", way.name, status, answered, body)
			}
		}
	}
}

// A holder that read the request and died before answering may have
// run it: Unknown answers, never Unreached (which would invite a retry).
func TestAForwardTheHolderDiedOnIsUnknown(t *testing.T) {
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer holder.Close()
	for _, way := range forwardWays {
		if status, _, answered := forwardTo(t, holder.URL, way.whole); status != 502 || answered != "unknown" {
			t.Errorf("%s: status %d, answered %q; want 502 by Unknown", way.name, status, answered)
		}
	}
}

// A holder that dies mid-stream breaks the caller's stream: the lines
// it sent arrive, and the stream does not end as if complete.
func TestAHolderDyingMidStreamBreaksTheCallersStream(t *testing.T) {
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderFrom) != "rep_A" || r.URL.Path != "/v1/devices/dev_X/instructions" {
			t.Errorf("the holder got %s with hop from %q", r.URL.Path, r.Header.Get(HeaderFrom))
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(`{"event":"accepted","instructionId":"ins_X"}` + "\n"))
		w.(http.Flusher).Flush()
		conn, buf, _ := http.NewResponseController(w).Hijack()
		buf.Flush()
		conn.Close()
	}))
	defer holder.Close()
	for _, way := range forwardWays {
		status, body, answered := forwardTo(t, holder.URL, way.whole)
		if status != 200 || answered != "" || !strings.HasPrefix(body, "broken: ") {
			t.Errorf("%s: status %d, answered %q, body %q; want 200 and a broken stream", way.name, status, answered, body)
		}
	}
}
