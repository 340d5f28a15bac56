package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/atomicfile"
	"github.com/sema-agent/sema/internal/safetext"
)

// Environment of `sema device service`: where the unit goes, and which
// systemctl/launchctl runs (tests point both away from the real user's).
const (
	EnvServiceDir = "SEMA_SERVICE_DIR" // the systemd user unit dir, or the LaunchAgents dir
	EnvSystemctl  = "SEMA_SYSTEMCTL"   // default systemctl
	EnvLaunchctl  = "SEMA_LAUNCHCTL"   // default launchctl
)

// The service's names.
const (
	systemdUnitName = "sema-device.service"
	launchdLabel    = "dev.sema.device"
)

// noRestartCodes are serve's exits a supervisor must not restart
// (docs/executor.md): usage, revoked, superseded, upgrade needed, already
// running. 0 (a clean stop) is not restarted either; 1 is.
var noRestartCodes = []int{ExitUsage, ExitRevoked, ExitSuperseded, ExitUpgrade, ExitLocked}

type serviceFlags struct {
	stateDir, unitDir, binary string
	now                       bool
}

func newServiceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "service",
		Short: "Run `sema device serve` as a service of this user (systemd on Linux, launchd on macOS)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("service needs a subcommand: install")}
		},
	}
	var f serviceFlags
	install := &cobra.Command{
		Use:   "install [--now] [--state-dir DIR]",
		Short: "Write a user service that keeps `sema device serve` running, and say how to drive it",
		Long: "install writes a systemd user unit (Linux) or a launchd agent (macOS) that runs\n" +
			"`sema device serve` for this state dir as a long-lived process, outside any terminal. It is\n" +
			"restarted when it fails (exit 1, or killed), never after a clean stop or a terminal exit\n" +
			"(2 usage, 3 revoked, 4 superseded, 5 upgrade needed, 6 already running). --now also enables\n" +
			"and starts it; without a user service manager that fails with exit 1 and says so.\n" +
			"The unit goes to --unit-dir, else $" + EnvServiceDir + ", else the user's systemd or LaunchAgents dir.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runServiceInstall(f, runtime.GOOS) },
	}
	install.Flags().BoolVar(&f.now, "now", false, "also enable and start it")
	install.Flags().StringVar(&f.stateDir, "state-dir", "", "the device's state dir (default $"+device.EnvStateDir+", else the OS config dir + /sema/device)")
	install.Flags().StringVar(&f.unitDir, "unit-dir", "", "write the unit into this directory")
	install.Flags().StringVar(&f.binary, "binary", "", "the sema binary the service runs (default this one)")
	c.AddCommand(install)
	return c
}

func runServiceInstall(f serviceFlags, goos string) error {
	dir, err := device.StateDir(f.stateDir)
	if err != nil {
		return err
	}
	rec, err := device.LoadRecord(dir)
	if errors.Is(err, device.ErrNotEnrolled) {
		return fmt.Errorf("%w: run `sema device enroll` before installing the service", err)
	}
	if err != nil {
		return err
	}
	if rec.RevokedAt != nil {
		return exitf(ExitRevoked, "device %s was revoked; enroll again before installing the service", rec.DeviceID)
	}
	bin, err := serviceBinary(f.binary)
	if err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	unitDir := f.unitDir
	if unitDir == "" {
		unitDir = os.Getenv(EnvServiceDir)
	}
	var (
		name, content, logPath string
		start, stop, logs      string
	)
	switch goos {
	case "linux":
		if unitDir == "" {
			cfg, err := os.UserConfigDir()
			if err != nil {
				return err
			}
			unitDir = filepath.Join(cfg, "systemd", "user")
		}
		name, content = systemdUnitName, systemdUnit(bin, dir, rec.DeviceID)
		start = "systemctl --user daemon-reload && systemctl --user enable --now " + systemdUnitName
		stop = "systemctl --user stop " + systemdUnitName + "   (disable: systemctl --user disable " + systemdUnitName + ")"
		logs = "journalctl --user -u " + systemdUnitName + " -f"
	case "darwin":
		if unitDir == "" {
			unitDir = filepath.Join(home, "Library", "LaunchAgents")
		}
		logPath = filepath.Join(home, "Library", "Logs", "sema", "device.log")
		name, content = launchdLabel+".plist", launchdPlist(bin, dir, logPath)
		target := "gui/" + strconv.Itoa(os.Getuid())
		start = "launchctl bootstrap " + target + " " + shellQuote(filepath.Join(unitDir, name))
		stop = "launchctl bootout " + target + "/" + launchdLabel
		logs = "tail -f " + shellQuote(logPath)
	default:
		return fmt.Errorf("no user service manager on %s: run `sema device serve` under your own supervisor", goos)
	}
	if err := os.MkdirAll(unitDir, 0o755); err != nil {
		return fmt.Errorf("unit dir: %w", err)
	}
	if logPath != "" {
		if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
			return err
		}
	}
	unitPath := filepath.Join(unitDir, name)
	if err := atomicfile.Write(unitPath, []byte(content), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(Stdout, "Wrote %s: it runs `sema device serve --state-dir %s` for device %s.\n\n", unitPath, dir, safetext.String(rec.DeviceID))
	fmt.Fprintf(Stdout, "  start:   %s\n  stop:    %s\n  logs:    %s\n  status:  sema device status --state-dir %s\n\n", start, stop, logs, shellQuote(dir))
	fmt.Fprintln(Stdout, "It restarts after a failure, never after a clean stop or a revocation (exit 3: enroll again, then start it).")
	if goos == "linux" {
		fmt.Fprintln(Stdout, "To keep it running while you are logged out: loginctl enable-linger \"$USER\"")
	}
	if !f.now {
		return nil
	}
	if goos == "linux" {
		return startSystemd()
	}
	return startLaunchd(unitPath)
}

// serviceBinary is the sema the service runs: --binary, else this
// executable, unless that is a throwaway `go run` build.
func serviceBinary(flag string) (string, error) {
	bin := flag
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding this binary: %w (pass --binary)", err)
		}
		if strings.Contains(exe, string(filepath.Separator)+"go-build") {
			return "", usageError{errors.New("this sema is a temporary `go run` build that will disappear: " +
				"install it (go install ./cmd/sema) and run that, or pass --binary PATH")}
		}
		bin = exe
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(bin); err == nil {
		bin = resolved
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable sema binary", bin)
	}
	return bin, nil
}

// systemdUnit is the user unit. KillMode=mixed sends SIGTERM to serve
// alone, so that it says goodbye and lets its commands finish (R15); what
// is left when the stop timeout runs out is killed.
func systemdUnit(bin, stateDir, deviceID string) string {
	codes := make([]string, len(noRestartCodes))
	for i, c := range noRestartCodes {
		codes[i] = strconv.Itoa(c)
	}
	q := systemdQuote
	return "# Written by `sema device service install`.\n" +
		"[Unit]\n" +
		"Description=sema device executor (" + deviceID + ")\n" +
		"Documentation=https://github.com/sema-agent/sema/blob/main/docs/executor.md\n" +
		"Wants=network-online.target\n" +
		"After=network-online.target\n" +
		"\n" +
		"[Service]\n" +
		"Type=exec\n" +
		"ExecStart=" + q(bin) + " device serve --state-dir " + q(stateDir) + "\n" +
		"# serve's exit codes (docs/executor.md): 1 is retried; 0 is a clean stop; 2 usage, 3 revoked,\n" +
		"# 4 superseded, 5 upgrade needed and 6 already running must not be restarted.\n" +
		"Restart=on-failure\n" +
		"RestartSec=5s\n" +
		"RestartPreventExitStatus=" + strings.Join(codes, " ") + "\n" +
		"KillMode=mixed\n" +
		"TimeoutStopSec=30s\n" +
		"\n" +
		"[Install]\n" +
		"WantedBy=default.target\n"
}

// systemdQuote quotes one word of ExecStart: double quotes, with \, ", $
// and % escaped for systemd's parser and specifier expansion.
func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", "$$", "%", "%%")
	return `"` + r.Replace(s) + `"`
}

// launchdPlist is the launch agent. launchd has no "do not restart on
// these codes", only KeepAlive SuccessfulExit=false (restart after a
// non-zero exit): launchdScript turns serve's terminal exits into 0.
func launchdPlist(bin, stateDir, logPath string) string {
	script := launchdScript()
	var b bytes.Buffer
	x := func(s string) string {
		var e bytes.Buffer
		for _, r := range s {
			switch r {
			case '&':
				e.WriteString("&amp;")
			case '<':
				e.WriteString("&lt;")
			case '>':
				e.WriteString("&gt;")
			default:
				e.WriteRune(r)
			}
		}
		return e.String()
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by ` + "`sema device service install`" + `. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + launchdLabel + `</string>
	<key>ProgramArguments</key>
	<array>
		<string>/bin/sh</string>
		<string>-c</string>
		<string>` + x(script) + `</string>
		<string>` + x(bin) + `</string>
		<string>` + x(stateDir) + `</string>
	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>5</integer>
	<key>ExitTimeOut</key>
	<integer>30</integer>
	<key>ProcessType</key>
	<string>Background</string>
	<key>StandardOutPath</key>
	<string>` + x(logPath) + `</string>
	<key>StandardErrorPath</key>
	<string>` + x(logPath) + `</string>
</dict>
</plist>
`)
	return b.String()
}

// launchdScript runs serve (as sh -c SCRIPT BIN STATE_DIR), forwards
// SIGTERM and SIGINT to it so that it shuts down gracefully, and exits 0
// for serve's terminal exits (2–6) so that they count as successful and are
// not restarted, while 1 and a death by signal are.
func launchdScript() string {
	codes := make([]string, len(noRestartCodes))
	for i, c := range noRestartCodes {
		codes[i] = strconv.Itoa(c)
	}
	return `"$0" device serve --state-dir "$1" & pid=$!
trap 'kill -TERM $pid 2>/dev/null' TERM INT
wait $pid; code=$?
while kill -0 $pid 2>/dev/null; do wait $pid; code=$?; done
case $code in ` + strings.Join(codes, "|") + `) echo "sema device serve exited $code: not restarting" >&2; exit 0;; esac
exit $code`
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// startSystemd enables and starts the unit with systemctl --user.
func startSystemd() error {
	systemctl := envOr(EnvSystemctl, "systemctl")
	for _, args := range [][]string{{"--user", "daemon-reload"}, {"--user", "enable", "--now", systemdUnitName}} {
		out, err := exec.Command(systemctl, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("systemctl --user is unavailable here (%s %s: %v: %s); the unit is written, "+
				"but nothing was started: start `sema device serve` another way, or from a session with a user systemd",
				systemctl, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	fmt.Fprintln(Stdout, "Enabled and started "+systemdUnitName+".")
	return nil
}

// startLaunchd loads the agent (RunAtLoad starts it), replacing a loaded one.
func startLaunchd(plist string) error {
	launchctl := envOr(EnvLaunchctl, "launchctl")
	target := "gui/" + strconv.Itoa(os.Getuid())
	exec.Command(launchctl, "bootout", target+"/"+launchdLabel).Run() // not loaded is fine
	if out, err := exec.Command(launchctl, "bootstrap", target, plist).CombinedOutput(); err != nil {
		return fmt.Errorf("launchctl bootstrap failed (%v: %s); the agent is written, but nothing was started",
			err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintln(Stdout, "Loaded and started "+launchdLabel+".")
	return nil
}
