package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
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
	base := os.Getenv("SEMA_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SEMA_TEST_POSTGRES is not set: CI must run the PostgreSQL tests (run them through `make test`)")
		}
		t.Skip("!!! SKIPPING `sema server --postgres`: SEMA_TEST_POSTGRES is not set; run `make test` to start a throwaway PostgreSQL")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	schema := "t_" + strings.ToLower(rand.Text())
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Setenv(cli.EnvPostgres, u.String()) // inherited by the server process

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
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
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

// --tls-cert/--tls-key serve HTTPS.
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)

	s := startServer(t, t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("url %s", s.url)
	}
	cert, _ := x509.ParseCertificate(der)
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
