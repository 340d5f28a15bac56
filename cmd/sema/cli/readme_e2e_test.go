package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
)

// The README's shell blocks, run as a newcomer types them. Every line of
// them that runs sema is either run here — in the README's order, through
// /bin/sh, with the built sema first on $PATH, in two fresh homes (the
// user's machine and the device), against the `sema server` and the
// `sema device serve` the README's own lines start, with the placeholders of
// readmePlaceholders filled in — or named in readmeSkipped with the reason. A README line that is neither,
// and a table entry the README no longer has, fail the test by name.

// readmeLine is one line of a README shell block that runs sema.
type readmeLine struct {
	n    int    // its line number in README.md
	text string // as the README has it, without its comment
}

// shellFences are the info strings of the fenced blocks read as shell.
var shellFences = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// readmeSemaLines returns the lines of readme's shell blocks that run sema
// (or `go run ./cmd/sema`), comments cut.
func readmeSemaLines(readme string) []readmeLine {
	var out []readmeLine
	inBlock, shell := false, false
	for i, line := range strings.Split(readme, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence, ok := strings.CutPrefix(trimmed, "```"); ok {
			if !inBlock {
				shell = shellFences[strings.TrimSpace(fence)]
			}
			inBlock = !inBlock
			continue
		}
		if !inBlock || !shell {
			continue
		}
		if text := cutShellComment(trimmed); runsSema(text) {
			out = append(out, readmeLine{n: i + 1, text: text})
		}
	}
	return out
}

// cutShellComment drops a comment: from a # that begins a word, outside
// quotes, to the end of the line.
func cutShellComment(line string) string {
	var quote rune
	prev := ' '
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimSpace(line[:i])
		}
		prev = c
	}
	return strings.TrimSpace(line)
}

// runsSema says whether a shell line has sema as one of its words.
func runsSema(line string) bool {
	words := strings.FieldsFunc(line, func(c rune) bool { return strings.ContainsRune(" \t;|&<>()", c) })
	return slices.ContainsFunc(words, func(w string) bool { return w == "sema" || strings.HasSuffix(w, "/cmd/sema") })
}

// replaceWord replaces old where it stands as a whole shell word (or
// phrase): after the start or a blank, before the end, a blank or an
// operator (a newline counts as a blank, for the output a step wants).
func replaceWord(line, old, repl string) string {
	var b strings.Builder
	from := 0
	for {
		i := strings.Index(line[from:], old)
		if i < 0 {
			break
		}
		i += from
		end := i + len(old)
		before := i == 0 || strings.IndexByte(" \t\n", line[i-1]) >= 0
		after := end == len(line) || strings.IndexByte(" \t\n;|&)", line[end]) >= 0
		b.WriteString(line[from:i])
		if before && after {
			b.WriteString(repl)
		} else {
			b.WriteString(old)
		}
		from = end
	}
	b.WriteString(line[from:])
	return b.String()
}

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

// readmeRun is the newcomer's two machines, and what earlier lines printed.
type readmeRun struct {
	home, cwd, tmp string            // the user's machine (and the server's): its $HOME, where the lines are typed
	deviceHome     string            // the device's $HOME, where its lines are typed
	env            []string          // every line's environment but $HOME
	vars           map[string]string // placeholder (or run variable) → value
	lane           *laneServer       // the README's server: its URL and admin key
	enrollLine     string            // what `sema token` printed
	up             []*proc           // the lines that keep running, in start order
	spare          *proc             // the spare device's executor
	spareDir       string
	tmpBefore      []string
}

// startSpareDevice enrolls a second device and serves it: the one the
// README's revoke and forget lines take.
func startSpareDevice(t *testing.T, r *readmeRun) {
	r.spareDir = t.TempDir()
	p := startProc(t, r.envOn(r.home), nil, "device", "enroll", "--token", issueToken(t, r.lane.url, r.lane.key),
		"--workspace", t.TempDir(), "--state-dir", r.spareDir, "--name", "spare")
	if code := p.wait(t); code != 0 {
		t.Fatalf("enrolling the spare device: exit %d: %s", code, p.stderr)
	}
	id := strings.TrimSpace(p.stdout.String())
	r.spare = startProc(t, r.envOn(r.home), nil, "device", "serve", "--state-dir", r.spareDir)
	waitFor(t, "the spare device to come online", func() bool { return r.lane.online(t, id) })
	r.vars[spareDevice] = id
}

// envOn is the environment of a line typed on the machine whose $HOME is home.
func (r *readmeRun) envOn(home string) []string {
	return append(r.env[:len(r.env):len(r.env)], "HOME="+home)
}

// expand replaces the placeholders in s with this run's values.
func (r *readmeRun) expand(t *testing.T, l readmeLine, s string, with map[string]string) string {
	t.Helper()
	for _, ph := range readmePlaceholders {
		if replaceWord(s, ph.text, "\x00") == s {
			continue
		}
		name := ph.text
		if w, ok := with[name]; ok {
			name = w
		}
		v, ok := r.vars[name]
		if !ok {
			t.Fatalf("README.md:%d uses %s (%s) before any line gave it a value", l.n, ph.text, ph.means)
		}
		s = replaceWord(s, ph.text, v)
	}
	if strings.Contains(s, "…") {
		t.Fatalf("README.md:%d: %q has a placeholder readmePlaceholders does not know", l.n, s)
	}
	return s
}

// start runs a line with /bin/sh -e, with home as $HOME, in dir; a line
// that keeps running is exec'd, so that signals reach sema.
func (r *readmeRun) start(t *testing.T, home, dir, line, stdin string, keepsRunning bool) *proc {
	t.Helper()
	script := line
	if keepsRunning {
		if strings.ContainsAny(line, ";|&<>") {
			t.Fatalf("%q keeps running but is not a simple command", line)
		}
		script = "exec " + line
	}
	p := &proc{cmd: exec.Command("/bin/sh", "-ec", script), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env = dir, append(os.Environ(), r.envOn(home)...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = strings.NewReader(stdin), p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // its own process group: a pipeline's every process
		<-p.done
	})
	return p
}

// run runs one README line as its step says and checks what it did.
func (r *readmeRun) run(t *testing.T, l readmeLine, st readmeStep) readmeResult {
	t.Helper()
	if st.before != nil {
		st.before(t, r)
	}
	line := r.expand(t, l, l.text, st.with)
	home, dir := r.home, r.cwd
	if st.device {
		home, dir = r.deviceHome, r.deviceHome
	}
	p := r.start(t, home, dir, line, st.stdin, st.up != nil || st.follow != "")
	running := func() {
		select {
		case <-p.done:
			t.Fatalf("README.md:%d: %s exited: %v\nstdout:\n%s\nstderr:\n%s", l.n, line, p.err, p.stdout, p.stderr)
		default:
		}
	}
	switch {
	case st.up != nil:
		waitFor(t, line, func() bool { running(); return st.up(t, r, p) })
		r.up = append(r.up, p)
	case st.follow != "":
		waitFor(t, line+" to print "+st.follow, func() bool { running(); return strings.Contains(p.stdout.String(), st.follow) })
		p.cmd.Process.Signal(syscall.SIGINT)
	}
	res := readmeResult{line: line, code: -1}
	if st.up == nil {
		res.code = p.wait(t)
	}
	res.stdout, res.stderr = p.stdout.String(), p.stderr.String()
	if st.up == nil && res.code != st.code {
		t.Fatalf("README.md:%d: %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", l.n, line, res.code, st.code, res.stdout, res.stderr)
	}
	if want := r.expand(t, l, st.out, st.with); !strings.Contains(res.stdout, want) {
		t.Errorf("README.md:%d: %s printed %q, want it to hold %q", l.n, line, res.stdout, want)
	}
	if st.check != nil {
		st.check(t, r, res)
	}
	if st.up != nil {
		t.Logf("README.md:%d: %s → running", l.n, line)
	} else {
		t.Logf("README.md:%d: %s → exit %d", l.n, line, res.code)
	}
	return res
}

// Every `sema …` line of the README's shell blocks runs as written, in
// order, on a fresh machine: a lane server and a device the README's lines
// start, enroll and serve, the user commands against them, and then SIGTERM
// stops the executor and the server cleanly.
func TestTheREADMERunsAsWritten(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := readmeSemaLines(string(b))
	seen := map[string]bool{}
	var uncovered []string
	for _, l := range lines {
		seen[l.text] = true
		_, run := readmeSteps[l.text]
		_, skipped := readmeSkipped[l.text]
		switch {
		case run && skipped:
			uncovered = append(uncovered, fmt.Sprintf("README.md:%d: %s  (both run and skipped)", l.n, l.text))
		case !run && !skipped:
			uncovered = append(uncovered, fmt.Sprintf("README.md:%d: %s", l.n, l.text))
		}
	}
	for text := range readmeSteps {
		if !seen[text] {
			t.Errorf("readmeSteps has %q, which the README no longer has", text)
		}
	}
	for text := range readmeSkipped {
		if !seen[text] {
			t.Errorf("readmeSkipped has %q, which the README no longer has", text)
		}
	}
	if len(uncovered) > 0 {
		t.Fatalf("README lines neither run by readmeSteps nor skipped with a reason in readmeSkipped:\n%s", strings.Join(uncovered, "\n"))
	}

	r := newReadmeRun(t)
	for _, l := range lines {
		if st, ok := readmeSteps[l.text]; ok {
			r.run(t, l, st)
		}
	}
	// "holds the lane until SIGTERM/Ctrl-C": the executor, then the
	// server, each stop cleanly.
	for _, p := range slices.Backward(r.up) {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t); code != 0 {
			t.Errorf("%v: exit %d after SIGTERM:\n%s", p.cmd.Args, code, p.stderr)
		}
	}
}

// newReadmeRun makes the newcomer's two machines: theirs (a $HOME, and
// the directory the lines are typed in, with notes.txt and a directory
// src), and the device (a $HOME with ~/src, a project whose `make test`
// prints "tests pass"); sema on $PATH, no SEMA_ variable set.
func newReadmeRun(t *testing.T) *readmeRun {
	r := &readmeRun{home: t.TempDir(), cwd: t.TempDir(), tmp: t.TempDir(), deviceHome: t.TempDir()}
	files := map[string]string{
		filepath.Join(r.deviceHome, "src", "Makefile"): "test:\n\t@echo tests pass\n",
		filepath.Join(r.cwd, "notes.txt"):              notesTxt,
		filepath.Join(r.cwd, "src", "a.txt"):           "a\n",
		filepath.Join(r.cwd, "src", "sub", "b.txt"):    "b\n",
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.env = []string{"TMPDIR=" + r.tmp, "XDG_CONFIG_HOME=",
		"PATH=" + filepath.Dir(semaBin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		cli.EnvServer + "=", cli.EnvAPIKey + "=", cli.EnvDevice + "=", cli.EnvDataDir + "=", cli.EnvPostgres + "=",
		device.EnvStateDir + "=", cli.EnvServiceDir + "=", cli.EnvSystemctl + "=false", cli.EnvLaunchctl + "=false"}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	r.vars = map[string]string{
		"go run ./cmd/sema":            "sema",
		"0.0.0.0:8420":                 addr,
		"http://lane.example.com:8420": "http://" + addr,
		"laptop":                       host,
		"[LOCAL|-]":                    "-",
		"[--now]":                      "",
	}
	return r
}

// The README's lines are found and cut as a shell reads them.
func TestReadmeSemaLines(t *testing.T) {
	readme := "text sema run x\n```sh\nsema run a   # a comment\n# sema in a comment\nprintf '#x' | sema run wc -c\nmake test\n" +
		"go run ./cmd/sema quickstart\n```\n```json\n{\"sema\": 1}\n```\n```\nsema fs ls # c\n```\n"
	got := readmeSemaLines(readme)
	want := []readmeLine{{3, "sema run a"}, {5, "printf '#x' | sema run wc -c"}, {7, "go run ./cmd/sema quickstart"}, {13, "sema fs ls"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, c := range []struct{ line, old, repl, want string }{
		{"sema devices rename laptop work-laptop", "laptop", "vm", "sema devices rename vm work-laptop"},
		{"sema devices revoke dev_…; sema x dev_…", "dev_…", "dev_1", "sema devices revoke dev_1; sema x dev_1"},
		{"sema fs get notes.txt [LOCAL|-]", "[LOCAL|-]", "-", "sema fs get notes.txt -"},
		{"sema run dev_…x", "dev_…", "dev_1", "sema run dev_…x"},
	} {
		if got := replaceWord(c.line, c.old, c.repl); got != c.want {
			t.Errorf("replaceWord(%q, %q): %q, want %q", c.line, c.old, got, c.want)
		}
	}
}
