package cli_test

import (
	"strings"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// `sema run` reads like ssh: sema's flags come before the command, every
// word from the command's first on is the command's, -- is still taken,
// and --env reaches the command's environment.
func TestRunTakesTheCommandsWordsAsSSHDoes(t *testing.T) {
	s := startServer(t, t.TempDir())
	enrollAndServe(t, s, t.TempDir())

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "printf", "'%s|'", "-a", "--device", "x"}, "-a|--device|x|"},
		{[]string{"run", "--", "printf", "'%s|'", "-n", "--timeout"}, "-n|--timeout|"},
		{[]string{"run", "-n", "printf", "'%s|'", "-v"}, "-v|"},
		{[]string{"run", "--env", "A=1", "--env", "B=two words", "--env", "A=3", `printf '%s|' "$A" "$B"`}, "3|two words|"},
	} {
		out, errOut, code := s.sema(t, nil, tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("%q: exit %d, %q, want %q: %s", tc.args, code, out, tc.want, errOut)
		}
	}
	for _, args := range [][]string{{"run"}, {"run", "--env", "A", "true"}, {"run", "--env", "=1", "true"}, {"run", "--timeout", "0s", "true"}} {
		if _, errOut, code := s.sema(t, nil, args...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want usage: %s", args, code, errOut)
		}
	}

	help, _, code := s.sema(t, nil, "run", "--help")
	if code != 0 || strings.Count(help, "(default 10m0s)") != 1 {
		t.Errorf("run --help does not give the default --timeout once:\n%s", help)
	}
	for _, line := range strings.Split(help, "\n") {
		if strings.Contains(line, "--server") && strings.Count(line, "default") != 1 {
			t.Errorf("run --help gives --server's default %d times: %q", strings.Count(line, "default"), line)
		}
	}
}
