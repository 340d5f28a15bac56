package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// BenchmarkForwardStream forwards an NDJSON stream of 64 KiB chunks (a
// device's stdout, base64 in lines as the lane writes them, each line
// flushed) from a holder to a caller: the forwarding replica's cost per
// byte, apart from the lane's.
func BenchmarkForwardStream(b *testing.B) {
	line := append(append([]byte(`{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"`), bytes.Repeat([]byte("A"), 87384)...), "\"}\n"...)
	const lines = 256
	holder := startHolder(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for range lines {
			w.Write(line)
			w.(http.Flusher).Flush()
		}
	})
	front := forwardingFront(b, holder.URL, false)
	b.SetBytes(int64(len(line) * lines))
	for b.Loop() {
		resp, err := http.Post(front.URL+"/v1/devices/dev_X/instructions", "application/json", bytes.NewReader([]byte(`{}`)))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(len(line)*lines) {
			b.Fatalf("%d bytes, want %d", n, len(line)*lines)
		}
	}
}

// BenchmarkForwardRoundTrip is a small instruction's round trip (three
// NDJSON lines, each flushed, as for exec true) straight to the holder
// and through a forwarding replica: the hop's own cost.
func BenchmarkForwardRoundTrip(b *testing.B) {
	holder := startHolder(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range []string{`{"event":"accepted","instructionId":"ins_01KB5J1Y1Y8Y4X3W2V1T0S9R8Q"}`, `{"event":"chunk","kind":"exit","streamSeq":1,"exitCode":0}`, `{"event":"outcome","outcome":{"ok":true,"kind":"exec","exitCode":0},"state":"terminal"}`} {
			io.WriteString(w, l+"\n")
			w.(http.Flusher).Flush()
		}
	})
	held, streamed := forwardingFront(b, holder.URL, true), forwardingFront(b, holder.URL, false)
	for _, to := range []struct{ name, url string }{{"direct", holder.URL}, {"forwarded", held.URL}, {"forwarded-streamed", streamed.URL}} {
		b.Run(to.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Post(to.url+"/v1/devices/dev_X/instructions", "application/json", bytes.NewReader([]byte(`{"kind":"exec","args":{"command":"true"},"timeoutMs":10000}`)))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// startHolder is a test server standing for the replica holding a device.
func startHolder(b *testing.B, h http.HandlerFunc) *httptest.Server {
	holder := httptest.NewServer(h)
	b.Cleanup(holder.Close)
	return holder
}

// forwardingFront is a test server that forwards every request to the
// holder at holderURL, as a replica not holding the device does; whole:
// with its body held whole, as a small instruction's.
func forwardingFront(b *testing.B, holderURL string, whole bool) *httptest.Server {
	hop := newTestHop(b, testSecret, "rep_A", &fixedClock{time.Now()})
	f := NewForwarder(hop, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b.Cleanup(f.Close)
	f.Unknown = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(502) }
	base, _ := url.Parse(holderURL)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var held []byte
		if whole {
			held, _ = io.ReadAll(r.Body)
		}
		f.Forward(w, r, base, "192.0.2.7", held)
	}))
	b.Cleanup(front.Close)
	return front
}
