package cli_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// Mistakes at the command line: each gets its exit code and words that say
// what is wrong.
func TestUserCommandErrors(t *testing.T) {
	dead := "http://127.0.0.1:1"
	env := []string{cli.EnvAPIKey + "=sema_x", "TMPDIR=" + t.TempDir()}
	noData, missing := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "cert.pem")
	ws, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	notLane := httptest.NewServer(http.NotFoundHandler()) // a URL with a path, or another service
	defer notLane.Close()
	cases := []struct {
		args []string
		env  []string
		code int
		says string
	}{
		{[]string{"run", "--server", dead}, env, cli.ExitUsage, "needs a command"},
		{[]string{"run", "--server", dead, "--device", "dev_x", "--", "true"}, env, cli.ExitNeverStarted, "cannot reach the lane"},
		{[]string{"run", "--server", dead, "--", "true"}, []string{cli.EnvAPIKey + "="}, cli.ExitUsage, "no API key"},
		{[]string{"token", "--server", "ftp://x"}, env, cli.ExitUsage, "http:// or https://"},
		{[]string{"token", "--server", dead, "--workspace", ""}, env, cli.ExitUsage, "--workspace is empty"},
		{[]string{"fs"}, env, cli.ExitUsage, "subcommand"},
		{[]string{"fs", "cat"}, env, cli.ExitUsage, "usage: sema fs cat PATH"},
		{[]string{"server", "--tls-cert", "x"}, env, cli.ExitUsage, "go together"},
		{[]string{"server", "--data", noData, "--listen", "127.0.0.1:0", "--tls-cert", missing, "--tls-key", missing}, env, cli.ExitFailure, "--tls-cert/--tls-key: open " + missing},
		{[]string{"server", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--lease-ttl", "-1s"}, env, cli.ExitUsage, "negative"},
		{[]string{"devices", "revoke"}, env, cli.ExitUsage, "one device id"},
		{[]string{"devices", "dev_x"}, env, cli.ExitUsage, "devices takes no arguments"},
		{[]string{"history", "show"}, env, cli.ExitUsage, "history show takes one instruction id (ins_…)"},
		{[]string{"identity", "disable"}, env, cli.ExitUsage, "identity disable takes one identity's name or id"},
		{[]string{"server", "--data", t.TempDir(), "--listen", taken.Addr().String()}, env, cli.ExitFailure, "another process listens on " + taken.Addr().String() + ": --listen picks another address"},
		{[]string{"devices", "--server", notLane.URL + "/v1"}, env, cli.ExitFailure, "404: page not found (no lane API there: is --server the lane's base URL, such as http://host:8420?)"},
		{[]string{"devics"}, env, cli.ExitUsage, `unknown command "devics" for "sema" (did you mean device or devices? see sema --help)`},
		{[]string{"fs", "lss"}, env, cli.ExitUsage, `unknown command "lss" for "sema fs" (did you mean ls?)`},
		{[]string{"device", "serv"}, env, cli.ExitUsage, `(did you mean serve or service?)`},
		{[]string{"fs", "ls", "--server", dead, "."}, env, cli.ExitNeverStarted, "cannot reach the lane"},
		{[]string{"run", "--server", dead, "--timeout", "0s", "--", "true"}, env, cli.ExitUsage, "too short"},
		// A token copied without its set_ (or an API key given as one) is
		// named as such, not sent as a credential the lane calls an
		// invalid API key.
		{[]string{"device", "enroll", "--server", dead, "--token", "c9nGIXtWoq", "--workspace", ws, "--state-dir", state}, env, cli.ExitUsage, "--token: an enrollment token starts with set_"},
	}
	for _, tc := range cases {
		p := startProc(t, tc.env, nil, tc.args...)
		if code := p.wait(t); code != tc.code || !strings.Contains(p.stderr.String(), tc.says) {
			t.Errorf("%v: exit %d, want %d; said %q", tc.args, code, tc.code, p.stderr)
		}
	}
	// A certificate that cannot be read stops the server before its first
	// start: no data dir, no admin key.
	if _, err := os.Stat(noData); !os.IsNotExist(err) {
		t.Errorf("a server refused for its certificate left %s: %v", noData, err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("an enrollment refused for its token left %s: %v", state, err)
	}
}
