package inproc_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sema-agent/sema/internal/inproc"
)

func get(t *testing.T, h http.HandlerFunc) *http.Response {
	t.Helper()
	c := &http.Client{Transport: inproc.Transport{Handler: h}}
	resp, err := c.Get("http://lane.in-process/x?a=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// The head returns while the handler still writes: a stream is read as it
// is written, not when the handler returns.
func TestTheBodyStreamsWhileTheHandlerRuns(t *testing.T) {
	next := make(chan struct{})
	resp := get(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "one\n")
		<-next
		io.WriteString(w, "two\n")
	})
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("head %d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "one\n" || err != nil {
		t.Fatalf("first line %q %v", line, err)
	}
	close(next)
	rest, err := io.ReadAll(br)
	if string(rest) != "two\n" || err != nil {
		t.Fatalf("rest %q %v", rest, err)
	}
}

func TestTheHandlerSeesTheRequest(t *testing.T) {
	resp := get(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/x" || r.URL.Query().Get("a") != "1" || r.RequestURI != "/x?a=1" || r.RemoteAddr != "in-process" || r.Body == nil {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// Closing the body is a client hanging up: the handler's context ends.
func TestClosingTheBodyEndsTheHandlersContext(t *testing.T) {
	ended := make(chan error, 1)
	resp := get(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		_, err := io.WriteString(w, "late")
		ended <- err
	})
	resp.Body.Close()
	if err := <-ended; err == nil {
		t.Fatal("a write after the client hung up succeeded")
	}
}

func TestAPanickingHandlerBreaksTheBody(t *testing.T) {
	resp := get(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		panic("boom")
	})
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, inproc.ErrHandlerPanicked) || string(b) != "partial" {
		t.Fatalf("read %q, %v", b, err)
	}
}

func TestAHandlerThatWritesNothingAnswers200(t *testing.T) {
	resp := get(t, func(w http.ResponseWriter, r *http.Request) {})
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

func TestARequestWhoseContextEndsBeforeTheHeadFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	c := &http.Client{Transport: inproc.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-release
	})}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://lane.in-process/", strings.NewReader("body"))
	if _, err := c.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
