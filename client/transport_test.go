package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sema-agent/sema/client"
)

// The client speaks HTTP/1.1 to a lane on https:// even when it offers
// HTTP/2: a stream's bytes go into the TLS connection with no second
// framing layer. So it does when http.DefaultTransport, which it clones,
// has been used before (and set itself up for HTTP/2).
func TestClientSpeaksHTTP1OverTLS(t *testing.T) {
	var proto int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto = r.ProtoMajor
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"devices":[]}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	if resp, err := http.Get(srv.URL); err == nil { // not trusted: it only sets the default transport up
		resp.Body.Close()
	}
	c, err := client.New(srv.URL, "sema_k")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tr := c.HTTPClient().Transport.(*http.Transport)
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = pool
	if _, err := c.Devices(t.Context()); err != nil {
		t.Fatal(err)
	}
	if proto != 1 {
		t.Fatalf("the client spoke HTTP/%d", proto)
	}
}

// A lane whose certificate this machine does not trust (a newcomer's
// self-signed --tls-cert) is unreachable, and the message says how to
// trust it; other unreachable lanes get no such advice.
func TestAnUntrustedCertificateSaysHowToTrustIt(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // its side of the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for url, advised := range map[string]bool{srv.URL: true, closed.URL: false} {
		c, err := client.New(url, "sema_k")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Devices(t.Context())
		var ue *client.UnreachableError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "self-signed") != advised {
			t.Errorf("%s: %v, want an UnreachableError advising on the certificate: %v", url, err, advised)
		}
		c.Close()
	}
}
