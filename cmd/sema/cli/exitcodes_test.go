package cli_test

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// enrollWith enrolls a device with a fresh token and extra enroll flags,
// without starting serve.
func enrollWith(t *testing.T, s *laneServer, ws string, flags ...string) (stateDir, deviceID string) {
	t.Helper()
	stateDir = t.TempDir()
	args := append([]string{"device", "enroll", "--server", s.url, "--token", issueToken(t, s.url, s.key),
		"--workspace", ws, "--state-dir", stateDir}, flags...)
	out, errOut, code := s.sema(t, nil, args...)
	if code != 0 {
		t.Fatalf("enroll: exit %d: %s", code, errOut)
	}
	return stateDir, strings.TrimSpace(out)
}

// exitTable reads the README's `sema run` / `sema fs` exit table: the
// meaning of each code.
func exitTable(t *testing.T) map[int]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, found := strings.Cut(string(b), "| `sema run` / `sema fs` exit | meaning |")
	if !found {
		t.Fatal("the README has no exit table")
	}
	rows := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \| (.*) \|$`).FindAllStringSubmatch(strings.SplitN(table, "\n\n", 2)[0], -1) {
		code, _ := strconv.Atoi(m[1])
		rows[code] = m[2]
	}
	return rows
}

func dispatches(t *testing.T, s *laneServer) float64 {
	var n float64
	for name, v := range s.metrics(t) {
		if strings.HasPrefix(name, "sema_lane_dispatches_total") {
			n += v
		}
	}
	return n
}

// Every path of `sema run` and `sema fs` exits as the README's table says,
// and the table names each of them: approval denied, a missing --cwd, a
// missing local file, an unknown command. Through the real binary, a real
// lane, a real executor with approval on and the simulator as the device.
func TestExitCodesMatchTheREADME(t *testing.T) {
	table := exitTable(t)
	c := ctx(t)
	sim, sock, dir := startSimInShortDir(t)
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, []byte(`{"rules":[{"kinds":["execStream"],"commands":["touch *"]},{"kinds":["writeFile"],"paths":["*/denied.txt"]}]}`), 0o600)

	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	stateDir, id := enrollWith(t, s, ws)
	serve := startServe(t, stateDir, "--approve", "unix:"+sock, "--approval-policy", policy)
	waitFor(t, "the device to come online", func() bool { return s.online(t, id) })
	sim.out.waitFor(c, t, "host connected")
	t.Cleanup(func() { serve.cmd.Process.Kill() })

	check := func(what string, code int, errOut string, want int, says, row string) {
		t.Helper()
		if code != want || !strings.Contains(errOut, says) {
			t.Errorf("%s: exit %d, want %d; said %q (want %q)", what, code, want, errOut, says)
		}
		if row != "" && !strings.Contains(table[want], row) {
			t.Errorf("%s: the README's row for %d (%q) does not name %q", what, want, table[want], row)
		}
	}

	// The command's own code, also 1, with nothing of sema's on stderr
	// unless -v.
	_, errOut, code := s.sema(t, nil, "run", "--", "exit 3")
	check("run exit 3", code, errOut, 3, "", "")
	if errOut != "" {
		t.Errorf("run exit 3 wrote on stderr: %q", errOut)
	}
	_, errOut, code = s.sema(t, nil, "run", "-v", "false")
	check("run -v false", code, errOut, 1, "exit code 1", "")

	// A timeout says which flag raises it.
	_, errOut, code = s.sema(t, nil, "run", "--timeout", "300ms", "sleep", "5")
	check("run --timeout 300ms", code, errOut, cli.ExitTimeout, "--timeout raises the limit", "--timeout")

	// A missing --cwd: the device refuses to start it.
	_, errOut, code = s.sema(t, nil, "run", "--cwd", "no/such/dir", "--", "true")
	check("run --cwd missing", code, errOut, cli.ExitNeverStarted, "not_found", "missing `--cwd`")

	// Approval denied: nothing ran. run → never started; fs → the device said no.
	marker := filepath.Join(dir, "ran")
	run := startProc(t, s.env(t), nil, "run", "--", "touch "+marker)
	sim.out.waitFor(c, t, "pending r1: Run: touch "+marker)
	io.WriteString(sim.keys, "d\n")
	check("run denied", run.wait(t), run.stderr.String(), cli.ExitNeverStarted, "denied", "approval denied")
	local := filepath.Join(dir, "local.txt")
	os.WriteFile(local, []byte("x"), 0o600)
	put := startProc(t, s.env(t), nil, "fs", "put", local, "denied.txt")
	sim.out.waitFor(c, t, "pending r2: Write 1 byte to "+filepath.Join(ws, "denied.txt"))
	io.WriteString(sim.keys, "d\n")
	check("fs put denied", put.wait(t), put.stderr.String(), cli.ExitFailure, "denied", "approval denied")
	for _, p := range []string{marker, filepath.Join(ws, "denied.txt")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("a denied instruction ran: %s exists", p)
		}
	}

	// A missing local file: nothing was sent (the lane dispatched nothing).
	before := dispatches(t, s)
	_, errOut, code = s.sema(t, nil, "fs", "put", filepath.Join(dir, "missing.txt"), "x")
	check("fs put missing", code, errOut, cli.ExitNeverStarted, "nothing was sent", "missing local file")
	_, errOut, code = s.sema(t, nil, "fs", "put", dir, "x")
	check("fs put of a directory", code, errOut, cli.ExitNeverStarted, "nothing was sent", "")
	_, errOut, code = s.sema(t, nil, "run", "--admin-key-file", filepath.Join(dir, "missing.key"), "--", "true")
	check("run with a missing key file", code, errOut, cli.ExitNeverStarted, "nothing was sent", "")
	if after := dispatches(t, s); after != before {
		t.Errorf("a local failure reached the lane: %v dispatches, then %v", before, after)
	}

	// The device said no to a file instruction.
	_, errOut, code = s.sema(t, nil, "fs", "cat", "nope.txt")
	check("fs cat missing", code, errOut, cli.ExitFailure, "not_found", "the device said no")

	// Unknown commands and flags are usage.
	for _, args := range [][]string{{"frobnicate"}, {"fs", "frobnicate"}, {"device", "frobnicate"}, {"run", "--frobnicate", "--", "true"}, {"fs", "ls", "--frobnicate", "."}} {
		_, errOut, code := s.sema(t, nil, args...)
		check(strings.Join(args, " "), code, errOut, cli.ExitUsage, "unknown", "unknown command")
	}
}
