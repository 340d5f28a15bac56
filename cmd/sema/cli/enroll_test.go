package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// `sema device enroll` against a lane that cannot be reached, through the
// binary: the server comes from $SEMA_SERVER (no --server), the network
// error is retried for --retry-unreachable and said as "cannot reach the
// lane at URL: …" with exit 1, and the state dir enroll created is gone.
func TestEnrollUnreachableLaneExitsOneAndLeavesNoStateDir(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "http://" + ln.Addr().String()
	ln.Close() // a real closed port
	root := t.TempDir()
	stateDir := filepath.Join(root, "made", "state")
	p := startProc(t, []string{cli.EnvServer + "=" + server, cli.EnvAPIKey + "=sema_not-used"}, nil,
		"device", "enroll", "--token", "set_secret-token", "--workspace", t.TempDir(), "--state-dir", stateDir, "--retry-unreachable", "3s")
	if code := p.wait(t); code != cli.ExitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, cli.ExitFailure, p.stderr)
	}
	msg := p.stderr.String()
	if !strings.Contains(msg, "sema: cannot reach the lane at "+server+": connection refused") {
		t.Errorf("stderr:\n%s", msg)
	}
	if strings.Contains(msg, "token or the credential") || strings.Contains(msg, "set_secret-token") {
		t.Errorf("blames or prints the token:\n%s", msg)
	}
	if es, err := os.ReadDir(root); err != nil || len(es) != 0 {
		t.Errorf("the failed enrollment left %v in %s (%v)", es, root, err)
	}
	if p.stdout.String() != "" {
		t.Errorf("stdout %q, want nothing", p.stdout)
	}
}
