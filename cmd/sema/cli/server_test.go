package cli_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// `sema server` on PostgreSQL (the URL from $SEMA_POSTGRES_URL, so it is
// not in the process list): the first start is recorded in the registry,
// so a restart with another data dir prints no second key.
func TestServerOnPostgres(t *testing.T) {
	admin, schema := postgresSchema(t)
	u, _ := url.Parse(os.Getenv("SEMA_TEST_POSTGRES"))

	data := t.TempDir()
	s := startServer(t, data)
	if !strings.Contains(s.stderr.String(), "store=postgres") || strings.Count(s.stdout.String(), s.key) != 1 {
		t.Fatalf("first start:\n%s\n%s", s.stdout, s.stderr)
	}
	if strings.Contains(s.stderr.String(), u.Host) {
		t.Error("the database URL is in the logs")
	}
	if _, sqlite := os.Stat(filepath.Join(data, "sema.db")); sqlite == nil {
		t.Error("a SQLite file was created")
	}
	// The server is a replica, reached at its listen address.
	var advertised string
	if err := admin.QueryRowContext(t.Context(), "SELECT advertise_url FROM "+schema+".replicas").Scan(&advertised); err != nil || advertised != s.url {
		t.Errorf("the replica's row: %q, %v; want one, advertising %s", advertised, err, s.url)
	}
	if !strings.Contains(s.stderr.String(), "advertise_url="+s.url) {
		t.Errorf("the startup line does not name the advertise URL:\n%s", s.stderr)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rows int
	if err := admin.QueryRowContext(t.Context(), "SELECT count(*) FROM "+schema+".replicas").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d replica rows after SIGTERM (%v); want the row removed", rows, err)
	}
	again := startProc(t, nil, nil, "server", "--listen", "127.0.0.1:0", "--data", data)
	waitFor(t, "the restart", func() bool { return listeningURL.MatchString(again.stderr.String()) })
	if strings.Contains(again.stdout.String(), "sema_") || !strings.Contains(again.stderr.String(), "admin identity exists") {
		t.Errorf("restart:\n%s\n%s", again.stdout, again.stderr)
	}
	again.cmd.Process.Signal(syscall.SIGTERM)
	if code := again.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// --advertise-url is a replica's, so it needs --postgres, and a URL the
// other replicas can dial; both are refused before anything is opened.
func TestServerAdvertiseURLRefusals(t *testing.T) {
	var out bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &out
	t.Cleanup(func() { cli.Stdout, cli.Stderr = os.Stdout, os.Stderr })
	t.Setenv(cli.EnvPostgres, "")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--advertise-url", "http://10.0.0.5:8420"}, "--advertise-url needs --postgres"},
		{[]string{"--postgres", "postgres://nowhere.invalid/sema", "--advertise-url", "10.0.0.5:8420"}, `--advertise-url "10.0.0.5:8420"`},
		{[]string{"--postgres", "postgres://nowhere.invalid/sema", "--advertise-url", "ftp://10.0.0.5"}, `--advertise-url "ftp://10.0.0.5"`},
	} {
		out.Reset()
		args := append([]string{"server", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, c.flags...)
		if code := cli.Run(t.Context(), args); code != cli.ExitUsage || !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: exit %d (want %d), %q; want it to say %q", c.flags, code, cli.ExitUsage, out.String(), c.want)
		}
	}
}

// --tls-cert/--tls-key serve HTTPS.
func TestServerTLS(t *testing.T) {
	certFile, keyFile, cert := selfSigned(t, t.TempDir())
	s := startServer(t, t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("url %s", s.url)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	resp, err := hc.Get(s.url + "/v1/capabilities")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("capabilities over TLS: %d", resp.StatusCode)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ = x509.ParseCertificate(der)
	return certFile, keyFile, cert
}
