package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The user's commands against a lane on https:// with a private CA
// (SSL_CERT_FILE), the executor on wss://: enroll, serve, `sema run` and
// an `fs put`/`fs get` round trip, output and files byte for byte.
func TestCommandsOverTLS(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	s := startServer(t, t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile)
	trust := "SSL_CERT_FILE=" + certFile
	sema := func(args ...string) (string, string, int) {
		t.Helper()
		p := startProc(t, append(s.env(t), trust), nil, args...)
		code := p.wait(t)
		return p.stdout.String(), p.stderr.String(), code
	}
	ws := t.TempDir()
	line, errOut, code := sema("token", "--workspace", ws)
	if code != 0 {
		t.Fatalf("token: exit %d: %s", code, errOut)
	}
	stateDir := t.TempDir()
	id, errOut, code := sema(append(strings.Fields(line)[1:], "--state-dir", stateDir)...)
	if code != 0 {
		t.Fatalf("enroll: exit %d: %s", code, errOut)
	}
	id = strings.TrimSpace(id)
	// Without the trust, the CLI and the executor say how to give it.
	untrusted := startProc(t, append(s.env(t), "SSL_CERT_FILE="), nil, "devices")
	if code := untrusted.wait(t); code != 1 || !strings.Contains(untrusted.stderr.String(), "point SSL_CERT_FILE at it") {
		t.Errorf("devices without the trust: exit %d: %s", code, untrusted.stderr)
	}
	serve := startProc(t, []string{"TMPDIR=" + t.TempDir(), "SSL_CERT_FILE="}, nil, "device", "serve", "--state-dir", stateDir)
	waitFor(t, "serve to say how to trust the certificate", func() bool {
		return strings.Contains(serve.stderr.String(), "point SSL_CERT_FILE at it")
	})
	serve.cmd.Process.Signal(syscall.SIGTERM)
	serve.wait(t)
	startProc(t, []string{"TMPDIR=" + t.TempDir(), trust}, nil, "device", "serve", "--state-dir", stateDir)
	waitFor(t, "the device to come online over wss://", func() bool {
		out, _, code := sema("devices")
		return code == 0 && strings.Contains(out, id) && strings.Contains(out, "online")
	})

	out, errOut, code := sema("run", "--device", id, "--", "head -c 1000000 /dev/zero; printf end")
	if code != 0 || out != strings.Repeat("\x00", 1000000)+"end" {
		t.Fatalf("run over TLS: exit %d, %d bytes of stdout: %s", code, len(out), errOut)
	}
	content := bytes.Repeat([]byte("0123456789abcdef"), 100000)
	src := filepath.Join(t.TempDir(), "src.bin")
	os.WriteFile(src, content, 0o600)
	if _, errOut, code := sema("fs", "put", "--device", id, src, "f.bin"); code != 0 {
		t.Fatalf("fs put over TLS: exit %d: %s", code, errOut)
	}
	got := filepath.Join(t.TempDir(), "got.bin")
	if _, errOut, code := sema("fs", "get", "--device", id, "f.bin", got); code != 0 {
		t.Fatalf("fs get over TLS: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, content) {
		t.Fatalf("fs get over TLS: %d bytes, not the %d put", len(b), len(content))
	}
}
