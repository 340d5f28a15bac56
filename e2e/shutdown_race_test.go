package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

// A replica shut down while a socket it let in is starting: Shutdown must
// wait for that socket's handler (it returns "when every connection has
// ended"), and under -race the handler's count must be ordered before
// Shutdown's wait. A handler counted only after websocket.Accept had
// answered 101, outside the lane's lock, would let a Shutdown begun when the
// 101 arrived return before the handler was counted, or wait on a count
// raised concurrently (a WaitGroup misuse).
func TestShutdownWithASocketJustLetIn(t *testing.T) {
	before := goleak.IgnoreCurrent()
	defer goleak.VerifyNone(t, before)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	for range 50 {
		srv, err := lane.New(lane.Config{Store: st, Logger: logger(t), HandshakeDeadline: waitLimit})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(httpapi.New(srv))
		url := "ws" + strings.TrimPrefix(hs.URL, "http") + protocol.WSPath
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Shutdown(ctx) }()
		// The socket never says hello; it is served until the device goes
		// away. Shutdown cannot have returned before that.
		if _, _, err := c.Read(ctx); err != nil { // the challenge
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned (%v) while a socket it let in was still served", err)
		default:
		}
		c.CloseNow()
		if err := <-done; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		hs.Close()
	}
}
