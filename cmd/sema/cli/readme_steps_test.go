package cli_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
)

// What each README line must do, what its placeholders stand for, and
// the lines not run here, with why.

// readmePlaceholders are the README's stand-ins for what differs on each
// reader's machine, replaced where they stand as whole words. Each value
// comes from this machine, or from what an earlier README line printed, as
// a reader copies it from their terminal.
var readmePlaceholders = []struct{ text, means, value string }{
	{"go run ./cmd/sema", "sema, run from a checkout", "sema: the binary TestMain built from ./cmd/sema, first on $PATH"},
	{"0.0.0.0:8420", "the server's listen address", "127.0.0.1 and a port that was free a moment before"},
	{"http://lane.example.com:8420", "the lane's URL, as the device reaches it", "http://127.0.0.1:PORT, the same port"},
	{"set_…", "the enrollment token", "the token in the enroll line `sema token` printed"},
	{"dev_…", "your device's id", "the id `sema device enroll` printed; revoke and forget take a spare device's (their steps say why)"},
	{"laptop", "your device's name", "this machine's host name: enroll names a device after it by default"},
	{"[LOCAL|-]", "an optional LOCAL, or - for stdout", "-"},
	{"ins_…", "an instruction's id", "the one the accepted event of `sema run --json` named"},
	{"key_…", "an API key's id", "the one `sema apikey create` named"},
	{"[--now]", "an optional flag", "left out: --now starts the unit with this user's real systemctl, which a test never touches"},
}

// spareDevice is the run variable that holds the spare device's id.
const spareDevice = "spare device"

// readmeStep is how one README line runs and what it must do. The zero
// step runs the line to its end and wants exit 0.
type readmeStep struct {
	stdin string // its standard input (else empty: a pipe at EOF)
	// device marks a line typed on the device: the device's own $HOME (no
	// saved login, no API key), in that home.
	device bool
	code   int               // the exit the README documents
	out    string            // stdout holds this (placeholders replaced)
	with   map[string]string // placeholders this line takes from another run variable
	// up marks a line that keeps running (a server, an executor): it is
	// ready once up holds, and stopped with SIGTERM after the last line,
	// wanting exit 0.
	up func(t *testing.T, r *readmeRun, p *proc) bool
	// follow marks a line that keeps following: Ctrl-C (SIGINT) ends it
	// once its stdout holds follow; then it wants code.
	follow string
	before func(t *testing.T, r *readmeRun)
	check  func(t *testing.T, r *readmeRun, res readmeResult)
}

// readmeResult is what a README line did.
type readmeResult struct {
	line, stdout, stderr string
	code                 int
}

// notesTxt is the notes.txt in the directory the lines are typed in.
const notesTxt = "a note to the device\n"

var readmeSteps = map[string]readmeStep{
	"go run ./cmd/sema quickstart": {
		stdin: "echo typed-at-the-prompt\n", // then EOF: Ctrl-D
		out:   "typed-at-the-prompt\n[exit 0",
		before: func(t *testing.T, r *readmeRun) {
			r.tmpBefore = dirNames(t, r.tmp)
		},
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			if left := dirNames(t, r.tmp); !slices.Equal(left, r.tmpBefore) {
				t.Errorf("quickstart left %v in $TMPDIR (had %v)", left, r.tmpBefore)
			}
		},
	},
	"sema server --listen 0.0.0.0:8420 --public-url http://lane.example.com:8420": {
		up: func(t *testing.T, r *readmeRun, p *proc) bool {
			return listeningURL.MatchString(p.stderr.String())
		},
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			keyFile := filepath.Join(r.home, ".config", "sema", "server", cli.AdminKeyFile)
			b, err := os.ReadFile(keyFile)
			if err != nil {
				t.Fatalf("the first start wrote no %s: %v", keyFile, err)
			}
			key := strings.TrimSpace(string(b))
			if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, the README says 0600", keyFile, fi.Mode().Perm())
			}
			if strings.Count(res.stdout, key) != 1 {
				t.Errorf("the first start did not print its key once:\n%s", res.stdout)
			}
			r.lane = &laneServer{url: r.vars["http://lane.example.com:8420"], key: key}
		},
	},
	"sema login --server http://lane.example.com:8420 < ~/.config/sema/server/admin.key": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			file := filepath.Join(r.home, ".config", "sema", cli.LoginFile)
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("the saved login %s: %v %v, the README says mode 0600", file, fi, err)
			}
			if strings.Contains(res.stdout+res.stderr, r.lane.key) {
				t.Errorf("login printed the key")
			}
		},
	},
	"sema token --workspace '~/src'": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			m := regexp.MustCompile(`^sema device enroll .*--token (set_\S+)`).FindStringSubmatch(res.stdout)
			if m == nil {
				t.Fatalf("sema token printed no enroll line: %q", res.stdout)
			}
			r.vars["set_…"], r.enrollLine = m[1], strings.TrimSpace(res.stdout)
		},
	},
	"sema device enroll --server http://lane.example.com:8420 --token set_… --workspace ~/src": {
		device: true,
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			if res.line != r.enrollLine {
				t.Errorf("sema token printed %q; the README's enroll line is %q", r.enrollLine, res.line)
			}
			id := strings.TrimSpace(res.stdout)
			if !strings.HasPrefix(id, "dev_") {
				t.Fatalf("enroll printed %q, not a device id", res.stdout)
			}
			r.vars["dev_…"] = id
		},
	},
	"sema device serve": {
		device: true,
		up:     func(t *testing.T, r *readmeRun, p *proc) bool { return r.lane.online(t, r.vars["dev_…"]) },
	},
	"sema devices":                            {out: "dev_…"},
	"sema devices --online":                   {out: "dev_…"},
	"sema devices --all":                      {out: "dev_…"},
	"sema run --device dev_… make test":       {out: "tests pass\n"},
	"sema fs put notes.txt notes.txt":         {check: wantFile("src/notes.txt", notesTxt)},
	"sema fs put -p notes.txt docs/new/n.txt": {check: wantFile("src/docs/new/n.txt", notesTxt)},
	"sema fs get notes.txt [LOCAL|-]":         {out: notesTxt},
	"sema fs put -r src dst; sema fs get -r dst": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			wantFile("src/dst/sub/b.txt", "b\n")(t, r, res)
			if b, err := os.ReadFile(filepath.Join(r.cwd, "dst", "sub", "b.txt")); err != nil || string(b) != "b\n" {
				t.Errorf("get -r dst: %q %v", b, err)
			}
		},
	},
	`printf 'a\nb\n' | sema run wc -l`:                                              {out: "2\n"},
	"sema fs cat notes.txt; sema fs ls; sema fs ls -l docs; sema fs stat notes.txt": {out: notesTxt + "Makefile\ndocs/\n"},
	"sema fs mkdir -p a/b c; sema fs rm -r a c": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			for _, p := range []string{"a", "c"} {
				if _, err := os.Stat(filepath.Join(r.deviceHome, "src", p)); !os.IsNotExist(err) {
					t.Errorf("~/src/%s is still there: %v", p, err)
				}
			}
		},
	},
	"sema run --json uname -a": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			first, _, _ := strings.Cut(res.stdout, "\n")
			var ev struct{ Event, InstructionID string }
			if err := json.Unmarshal([]byte(first), &ev); err != nil || ev.Event != "accepted" || ev.InstructionID == "" {
				t.Fatalf("run --json's first line %q: %v", first, err)
			}
			r.vars["ins_…"] = ev.InstructionID
		},
	},
	"sema version":                           {out: "sema "},
	"sema devices rename laptop work-laptop": {out: "renamed dev_… to work-laptop\n"},
	// Revoking the device the rest of the README uses would end it, so a
	// spare device, enrolled and serving, is the one revoked and forgotten.
	"sema devices revoke dev_…": {
		with:   map[string]string{"dev_…": spareDevice},
		before: startSpareDevice,
		out:    "revoked dev_…\n",
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			if code := r.spare.wait(t); code != cli.ExitRevoked {
				t.Errorf("the revoked device's executor exited %d, the README says 3:\n%s", code, r.spare.stderr)
			}
			if _, err := os.Stat(filepath.Join(r.spareDir, device.KeyFile)); !os.IsNotExist(err) {
				t.Errorf("the revoked device's key is still there: %v", err)
			}
		},
	},
	"sema devices forget dev_…": {
		with: map[string]string{"dev_…": spareDevice},
		out:  "forgot dev_…\n",
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			p := startProc(t, r.envOn(r.home), nil, "devices", "--all")
			if code := p.wait(t); code != 0 || strings.Contains(p.stdout.String(), r.vars[spareDevice]) {
				t.Errorf("sema devices --all: exit %d, still listing the forgotten device?\n%s", code, p.stdout)
			}
		},
	},
	"sema history": {before: historyHolds("ins_…"), out: "uname -a"},
	"sema history --device work-laptop --since 2h -f": {follow: "uname -a"},
	"sema history show ins_…":                         {out: "ins_…"},
	"sema identity create bob": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			if !regexp.MustCompile(`^sema_[A-Za-z0-9_-]+\n$`).MatchString(res.stdout) {
				t.Errorf("identity create printed %q, not the key alone", res.stdout)
			}
		},
	},
	"sema identity list": {out: " bob "},
	"sema apikey create": {
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			m := regexp.MustCompile(`sema apikey revoke (key_\w+)`).FindStringSubmatch(res.stderr)
			if m == nil {
				t.Fatalf("apikey create named no key id: %q", res.stderr)
			}
			r.vars["key_…"] = m[1]
		},
	},
	"sema apikey list":         {out: "key_…"},
	"sema apikey revoke key_…": {out: "revoked key_…\n"},
	"sema device service install [--now]": {
		device: true,
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			unit, err := os.ReadFile(filepath.Join(r.deviceHome, ".config", "systemd", "user", "sema-device.service"))
			if err != nil || !strings.Contains(string(unit), "device serve --state-dir") {
				t.Errorf("the unit: %v\n%s", err, unit)
			}
		},
	},
	"sema device status": {device: true, out: "connected"},
	"sema device forget": {
		device: true,
		code:   cli.ExitLocked,
		check: func(t *testing.T, r *readmeRun, res readmeResult) {
			if _, err := os.Stat(filepath.Join(r.deviceHome, ".config", "sema", "device", device.KeyFile)); err != nil {
				t.Errorf("a refused forget removed the key: %v", err)
			}
		},
	},
}

// readmeSkipped are the README's sema lines this test does not run, and why.
var readmeSkipped = map[string]string{
	`claude mcp add sema -e SEMA_SERVER=http://lane.example:8420 -e SEMA_API_KEY="$SEMA_API_KEY" -- sema mcp`: "it configures Claude Code, " +
		"which is not here; `sema mcp` itself is driven by mcp_e2e_test.go and mcp_interop_test.go",
	`claude mcp add --transport http sema http://lane.example:8420/v1/mcp --header "Authorization: Bearer $SEMA_API_KEY"`: "it configures " +
		"Claude Code, which is not here; /v1/mcp is driven by mcp_e2e_test.go and mcp_interop_test.go",
}

// wantFile checks a file under the device's $HOME after a line.
func wantFile(rel, content string) func(*testing.T, *readmeRun, readmeResult) {
	return func(t *testing.T, r *readmeRun, res readmeResult) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(r.deviceHome, rel)); err != nil || string(b) != content {
			t.Errorf("the device's ~/%s: %q %v, want %q", rel, b, err, content)
		}
	}
}

// historyHolds waits until the lane's history has the row of the
// instruction in the run variable name: the lane writes its history in
// batches a moment after an instruction settles (docs/audit.md).
func historyHolds(name string) func(*testing.T, *readmeRun) {
	return func(t *testing.T, r *readmeRun) {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		waitFor(t, "the history to hold "+r.vars[name], func() bool {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, r.lane.url+"/v1/instructions/"+r.vars[name], nil)
			req.Header.Set("Authorization", "Bearer "+r.lane.key)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}

func dirNames(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
