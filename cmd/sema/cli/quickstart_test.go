package cli_test

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// runInProcess runs the CLI in this process with the given stdin and
// returns what it wrote.
func runInProcess(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut syncBuffer
	cli.Stdout, cli.Stderr, cli.Stdin = &out, &errOut, strings.NewReader(stdin)
	defer func() { cli.Stdout, cli.Stderr, cli.Stdin = os.Stdout, os.Stderr, os.Stdin }()
	code = cli.Run(t.Context(), args)
	return out.String(), errOut.String(), code
}

var quickstartSteps = []string{"lane server", "enroll", "connect", "execStream", "createDir", "writeFile", "readBinaryFile", "canonicalPath", "exists"}

// checkQuickstart checks the demonstration's lines and that the temp dir is
// gone.
func checkQuickstart(t *testing.T, out string, tmp string) {
	t.Helper()
	for _, step := range quickstartSteps {
		if !regexp.MustCompile(`✓ +[0-9]+\.[0-9] ms  ` + step + ` `).MatchString(out) {
			t.Errorf("no line for the step %s:\n%s", step, out)
		}
	}
	for _, want := range []string{"│ hello from ", "│ tick 3", "27 bytes, identical", "false for hello.txt.missing",
		"sema server --listen", "sema login --server", "sema token\n", "sema device enroll --server", "sema device serve"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("quickstart left %v in %s", left, tmp)
	}
}

func TestQuickstartNoPrompt(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out, errOut, code := runInProcess(t, "", "quickstart", "--no-prompt", "--workspace", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	checkQuickstart(t, out, tmp)
	if strings.Contains(out, "sema>") {
		t.Error("a prompt with --no-prompt")
	}
}

// Each typed line runs through the lane, with its exit code, until EOF.
func TestQuickstartPrompt(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ws := t.TempDir()
	os.WriteFile(ws+"/marker.txt", []byte("x"), 0o600)
	out, errOut, code := runInProcess(t, "echo typed-line\n\nls\necho to-stderr >&2; exit 3\n", "quickstart", "--workspace", ws)
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	checkQuickstart(t, out, tmp)
	for _, want := range []string{"sema> typed-line\n[exit 0 · ", "marker.txt\n[exit 0 · ", "[exit 3 · ", "SEMA_API_KEY=sema_"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "to-stderr") {
		t.Errorf("stderr: %q", errOut)
	}
	if !strings.HasSuffix(out, "sema> \n") {
		t.Errorf("EOF did not end the prompt: %q", out[max(0, len(out)-40):])
	}
}

// The binary, as the README runs it.
func TestQuickstartBinary(t *testing.T) {
	tmp := t.TempDir()
	p := startProc(t, []string{"TMPDIR=" + tmp}, bytes.NewReader(nil), "quickstart", "--no-prompt")
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, p.stdout, p.stderr)
	}
	checkQuickstart(t, p.stdout.String(), tmp)
}

// At the prompt, Ctrl-C (SIGINT) cancels the running command and the
// prompt comes back; typed while idle, it shows a new prompt. SIGTERM,
// SIGHUP and SIGPIPE end quickstart, and its temp dir (with the device's
// key in it) is gone.
func TestQuickstartSignals(t *testing.T) {
	for _, end := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE} {
		t.Run(end.String(), func(t *testing.T) {
			tmp := t.TempDir()
			in, typed, err := os.Pipe() // a file: the child reads it itself
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close(); typed.Close() })
			p := startProc(t, []string{"TMPDIR=" + tmp}, in, "quickstart")
			prompts := func() int { return strings.Count(p.stdout.String(), "sema> ") }
			waitFor(t, "the prompt", func() bool { return prompts() == 1 })
			if end == syscall.SIGHUP {
				io.WriteString(typed, "echo started; exec sleep 30\n")
				waitFor(t, "the command to start", func() bool { return strings.Contains(p.stdout.String(), "started\n") })
				p.cmd.Process.Signal(syscall.SIGINT)
				waitFor(t, "the prompt after Ctrl-C", func() bool { return prompts() == 2 })
				if out := p.stdout.String(); !strings.Contains(out, "[cancelled") {
					t.Fatalf("Ctrl-C did not cancel the command:\n%s", out)
				}
				p.cmd.Process.Signal(syscall.SIGINT)
				waitFor(t, "a new prompt after an idle Ctrl-C", func() bool { return prompts() == 3 })
				io.WriteString(typed, "echo after\n")
				waitFor(t, "the next command", func() bool { return strings.Contains(p.stdout.String(), "after\n[exit 0") })
			}
			p.cmd.Process.Signal(end)
			if code := p.wait(t); code != 0 {
				t.Fatalf("%v: exit %d:\n%s\n%s", end, code, p.stdout, p.stderr)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("%v left %v in %s", end, left, tmp)
			}
		})
	}
}
