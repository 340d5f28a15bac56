package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// login saves a lane's URL and a key the lane took (0600 in a 0700 dir);
// the other commands use them when no flag or SEMA_ variable says
// otherwise, and send the key only to its own server; whoami says which
// identity and where the key came from; logout removes it. The key is
// never printed.
func TestLoginWhoamiLogout(t *testing.T) {
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())
	config := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + config, cli.EnvServer + "=", cli.EnvAPIKey + "=", "TMPDIR=" + t.TempDir()}
	sema := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		p := startProc(t, env, strings.NewReader(stdin), args...)
		code := p.wait(t)
		out, errOut := p.stdout.String(), p.stderr.String()
		if strings.Contains(out+errOut, s.key) {
			t.Fatalf("%q printed the key", args)
		}
		return out, errOut, code
	}

	if _, errOut, code := sema("", "devices"); code != cli.ExitUsage || !strings.Contains(errOut, "sema login") {
		t.Fatalf("devices before login: exit %d: %s", code, errOut)
	}
	if _, errOut, code := sema("sema_wrong\n", "login", "--server", s.url); code != cli.ExitFailure || !strings.Contains(errOut, "did not take the key") {
		t.Fatalf("login with a wrong key: exit %d: %s", code, errOut)
	}
	// A lane that cannot be reached is said as such: the key was never
	// put to it.
	if _, errOut, code := sema(s.key+"\n", "login", "--server", "http://127.0.0.1:1"); code != cli.ExitFailure ||
		!strings.Contains(errOut, "cannot reach the lane at http://127.0.0.1:1") || strings.Contains(errOut, "did not take the key") {
		t.Fatalf("login to a closed port: exit %d: %s", code, errOut)
	}
	file := filepath.Join(config, "sema", cli.LoginFile)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused key was saved: %v", err)
	}
	if _, errOut, code := sema(s.key+"\n", "login", "--server", s.url); code != 0 {
		t.Fatalf("login: exit %d: %s", code, errOut)
	}
	fi, err := os.Stat(file)
	di, derr := os.Stat(filepath.Dir(file))
	if err != nil || fi.Mode().Perm() != 0o600 || derr != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("the saved login: %v %v, its dir %v %v", fi, err, di, derr)
	}

	if out, errOut, code := sema("", "run", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Fatalf("run after login: exit %d: %q %s", code, out, errOut)
	}
	out, errOut, code := sema("", "whoami", "--json")
	var w struct {
		Server, KeyFrom, Identity string
		Admin                     bool
		Devices                   int
	}
	if code != 0 || json.Unmarshal([]byte(out), &w) != nil || w.Server != s.url || w.KeyFrom != "the saved login" || !w.Admin || w.Identity == "" || w.Devices != 1 {
		t.Fatalf("whoami --json: exit %d: %s %s", code, out, errOut)
	}
	if out, _, code := sema("", "whoami"); code != 0 || !strings.Contains(out, ", the admin identity (key from the saved login)") || !strings.Contains(out, "1 device\n") {
		t.Fatalf("whoami: exit %d: %q", code, out)
	}

	// $SEMA_API_KEY wins over the saved login, and the saved key never
	// goes to another server.
	p := startProc(t, append(env[:len(env):len(env)], cli.EnvAPIKey+"=sema_other"), nil, "whoami")
	if code := p.wait(t); code != cli.ExitFailure || !strings.Contains(p.stderr.String(), "auth.forbidden") {
		t.Fatalf("whoami with $%s: exit %d: %s", cli.EnvAPIKey, code, p.stderr)
	}
	// A --server that is not the saved login's (a typo, another port)
	// says so, and how to log in there, rather than that nobody logged in.
	if _, errOut, code := sema("", "devices", "--server", "http://127.0.0.1:1"); code != cli.ExitUsage || !strings.Contains(errOut, "no API key for http://127.0.0.1:1") ||
		!strings.Contains(errOut, "the saved login is for "+s.url) || !strings.Contains(errOut, "sema login --server http://127.0.0.1:1") {
		t.Fatalf("devices on another server: exit %d: %s", code, errOut)
	}

	// Another identity's key names that identity, not the admin.
	bob, errOut, code := s.sema(t, nil, "identity", "create", "bob")
	if code != 0 {
		t.Fatalf("identity create bob: exit %d: %s", code, errOut)
	}
	if out, errOut, code := s.semaAs(t, strings.TrimSpace(bob), nil, "whoami"); code != 0 || !strings.Contains(out, `as "bob" (idn_`) || !strings.Contains(out, "0 devices") {
		t.Fatalf("whoami as bob: exit %d: %q %s", code, out, errOut)
	}

	if _, errOut, code := sema("", "logout"); code != 0 || !strings.Contains(errOut, "Logged out") {
		t.Fatalf("logout: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("logout left the file: %v", err)
	}
	if _, errOut, code := sema("", "logout"); code != 0 || !strings.Contains(errOut, "Not logged in") {
		t.Fatalf("logout twice: exit %d: %s", code, errOut)
	}
}
