//go:build linux

package cli_test

import (
	"io"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// Ctrl-C at login's key prompt ends login at once (130, nothing saved), and
// the terminal echoes again: the prompt had turned echo off.
func TestLoginPromptEndsOnCtrlC(t *testing.T) {
	ptmx, pts := openPTY(t)
	go func() { _, _ = io.Copy(io.Discard, ptmx) }() // the terminal's screen
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), cli.EnvAPIKey + "=", cli.EnvServer + "="}
	p := startProcAttr(t, env, pts, &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
		"login", "--server", "http://127.0.0.1:1")
	waitFor(t, "the key prompt", func() bool { return strings.Contains(p.stderr.String(), "API key: ") })
	waitFor(t, "echo off", func() bool {
		tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
		return err == nil && tio.Lflag&unix.ECHO == 0
	})
	p.cmd.Process.Signal(syscall.SIGINT) // what Ctrl-C sends the terminal's foreground
	if code := p.wait(t); code != cli.ExitCancelled {
		t.Errorf("exit %d, want %d: %s", code, cli.ExitCancelled, p.stderr)
	}
	tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Errorf("the terminal does not echo after login: %v", err)
	}
}
