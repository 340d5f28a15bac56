package client_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

func instructTrue(t *testing.T, url string) error {
	t.Helper()
	c, err := client.New(url, "sema_key")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Instruct(t.Context(), "dev_1", api.InstructionRequest{Kind: protocol.KindExec, Args: []byte(`{"command":"true"}`), TimeoutMs: 1000}, client.Sink{})
	return err
}

// A replica that failed after a forwarded request reached it answers 502
// instruction.outcome_unknown: the one error answer after which the
// instruction may have run. Any other error answer is a refusal.
func TestAnOutcomeUnknownAnswerMayHaveRun(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		may    bool
	}{
		{http.StatusBadGateway, api.CodeOutcomeUnknown, true},
		{http.StatusServiceUnavailable, api.CodeUnavailable, false},
		{http.StatusNotFound, api.CodeDeviceNotFound, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"errorCode":"`+tc.code+`","message":"m"}`)
		}))
		err := instructTrue(t, srv.URL)
		srv.Close()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != tc.code || ce.MayHaveRun() != tc.may {
			t.Errorf("%d %s: %#v; want MayHaveRun %v", tc.status, tc.code, err, tc.may)
		}
	}
}

// A connection that breaks after the request was written whole, before any
// answer, may have dispatched it; one that could not be made sent nothing.
func TestAConnectionThatBrokeAfterTheRequestMayHaveRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	var ue *client.UnreachableError
	if err := instructTrue(t, srv.URL); !errors.As(err, &ue) || !ue.MayHaveRun() {
		t.Fatalf("broken after sending: %#v; want an UnreachableError that may have run", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := instructTrue(t, "http://"+addr); !errors.As(err, &ue) || ue.MayHaveRun() {
		t.Fatalf("nothing listening: %#v; want an UnreachableError that sent nothing", err)
	}
}
