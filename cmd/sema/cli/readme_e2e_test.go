package cli_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
