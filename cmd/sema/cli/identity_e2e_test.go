package cli_test

import (
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// semaAs runs one user command with another API key.
func (s *laneServer) semaAs(t *testing.T, apiKey string, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startProc(t, append(s.env(t), cli.EnvAPIKey+"="+apiKey), stdin, args...) // the last value wins
	code = p.wait(t)
	return p.stdout.String(), p.stderr.String(), code
}

var apiKeyLine = regexp.MustCompile(`^sema_[A-Za-z0-9_-]{43}\n$`)

// Identities through the binary: `sema server`'s first identity is the admin;
// it creates an identity whose key is printed alone on stdout, once; the
// new identity cannot manage identities; it creates, lists and revokes its
// own keys, and a revoked key is refused at once.
func TestIdentityAndAPIKeyCommands(t *testing.T) {
	s := startServer(t, t.TempDir())
	bobKey, errOut, code := s.sema(t, nil, "identity", "create", "bob")
	if code != 0 || !apiKeyLine.MatchString(bobKey) || !strings.Contains(errOut, "shown this once") {
		t.Fatalf("identity create: exit %d, stdout %q, stderr %s", code, bobKey, errOut)
	}
	bobKey = strings.TrimSpace(bobKey)
	list, errOut, code := s.sema(t, nil, "identity", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^idn_\S+\s+admin\s+admin\s`).MatchString(list) || !regexp.MustCompile(`(?m)^idn_\S+\s+bob\s+-\s`).MatchString(list) {
		t.Fatalf("identity list: exit %d\n%s%s", code, list, errOut)
	}
	if strings.Contains(list, bobKey) || strings.Contains(list, s.key) {
		t.Fatalf("identity list prints a key:\n%s", list)
	}
	if _, errOut, code := s.semaAs(t, bobKey, nil, "identity", "list"); code != cli.ExitFailure || !strings.Contains(errOut, "auth.forbidden") {
		t.Fatalf("bob listing identities: exit %d, %s", code, errOut)
	}

	second, errOut, code := s.semaAs(t, bobKey, nil, "apikey", "create")
	if code != 0 || !apiKeyLine.MatchString(second) {
		t.Fatalf("apikey create: exit %d, stdout %q, stderr %s", code, second, errOut)
	}
	second = strings.TrimSpace(second)
	keyID := regexp.MustCompile(`key_[0-9A-Z]{26}`).FindString(errOut)
	keys, errOut, code := s.semaAs(t, second, nil, "apikey", "list")
	if code != 0 || strings.Count(keys, "key_") != 2 || !strings.Contains(keys, keyID) || strings.Contains(keys, "sema_") {
		t.Fatalf("apikey list: exit %d\n%s%s", code, keys, errOut)
	}
	if out, errOut, code := s.semaAs(t, bobKey, nil, "apikey", "revoke", keyID); code != 0 || out != "revoked "+keyID+"\n" {
		t.Fatalf("apikey revoke: exit %d, %q %s", code, out, errOut)
	}
	if _, errOut, code := s.semaAs(t, second, nil, "apikey", "list"); code != cli.ExitFailure || !strings.Contains(errOut, "auth.forbidden") {
		t.Fatalf("the revoked key: exit %d, %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "apikey", "revoke"); code != cli.ExitUsage {
		t.Fatalf("apikey revoke without an id: exit %d, %s", code, errOut)
	}

	// The admin's last key is refused.
	adminKeys, _, _ := s.sema(t, nil, "apikey", "list", "--json")
	adminKeyID := regexp.MustCompile(`key_[0-9A-Z]{26}`).FindString(adminKeys)
	if _, errOut, code := s.sema(t, nil, "apikey", "revoke", adminKeyID); code != cli.ExitFailure || !strings.Contains(errOut, "api_key.last_admin_key") {
		t.Fatalf("revoking the admin's last key: exit %d, %s", code, errOut)
	}
}

// The first start's admin is still the admin after a restart, and no
// second admin is made.
func TestTheAdminSurvivesARestart(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	first.cmd.Process.Signal(syscall.SIGTERM)
	if code := first.wait(t); code != 0 {
		t.Fatalf("server exit %d: %s", code, first.stderr)
	}
	again := startServer(t, data)
	if again.key != first.key {
		t.Fatal("the restart wrote another admin key")
	}
	list, errOut, code := again.sema(t, nil, "identity", "list", "--json")
	if code != 0 || strings.Count(list, `"identityId"`) != 1 || !strings.Contains(list, `"admin": true`) {
		t.Fatalf("identity list after a restart: exit %d\n%s%s", code, list, errOut)
	}
}

// Identities have a lifecycle: names are unique, an identity can be
// disabled (its keys refused at once) and enabled again, the admin never
// disabled, and whoami names the caller.
func TestIdentityLifecycle(t *testing.T) {
	s := startServer(t, t.TempDir())
	bobKey, _, code := s.sema(t, nil, "identity", "create", "bob")
	if code != 0 {
		t.Fatal("identity create bob")
	}
	bobKey = strings.TrimSpace(bobKey)
	if _, errOut, code := s.sema(t, nil, "identity", "create", "bob"); code == 0 || !strings.Contains(errOut, "identity.name_taken") {
		t.Fatalf("a second bob: exit %d %s", code, errOut)
	}
	if out, errOut, code := s.semaAs(t, bobKey, nil, "whoami"); code != 0 || !strings.Contains(out, `"bob"`) {
		t.Fatalf("whoami as bob: exit %d %q %s", code, out, errOut)
	}
	if out, errOut, code := s.sema(t, nil, "identity", "disable", "bob"); code != 0 || !strings.HasPrefix(out, "disabled bob") {
		t.Fatalf("disable bob: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := s.semaAs(t, bobKey, nil, "apikey", "list"); code == 0 || !strings.Contains(errOut, "auth.forbidden") {
		t.Fatalf("a disabled identity's key: exit %d %s", code, errOut)
	}
	if out, _, _ := s.sema(t, nil, "identity", "list"); !strings.Contains(lineWith(out, "bob"), "disabled since") {
		t.Errorf("identity list does not say bob is disabled:\n%s", out)
	}
	if _, errOut, code := s.sema(t, nil, "identity", "enable", "bob"); code != 0 {
		t.Fatalf("enable bob: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.semaAs(t, bobKey, nil, "apikey", "list"); code != 0 {
		t.Fatalf("bob's key after enable: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "identity", "disable", "admin"); code == 0 || !strings.Contains(errOut, "identity.admin") {
		t.Fatalf("disabling the admin: exit %d %s", code, errOut)
	}
}
