package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
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
