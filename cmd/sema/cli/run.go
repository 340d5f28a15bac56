package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type runFlags struct {
	client  clientFlags
	device  string
	timeout time.Duration
	cwd     string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [--device ID] [--timeout 30s] [--cwd DIR] -- COMMAND…",
		Short: "Run a command on a device through the lane, streaming its output, with its exit code",
		Long: "run sends COMMAND (its words joined by spaces, run by the device's /bin/sh -c, as ssh does)\n" +
			"to the device as execStream, writes its stdout and stderr here as they come, and exits with\n" +
			"the command's exit code. Ctrl-C cancels it on the device and waits for the confirmation.\n" +
			"A relative --cwd is taken from the device's workspace root.\n\n" +
			"Exit codes when the command did not simply exit:\n" +
			"  124  timeout: the device killed the command at --timeout\n" +
			"  125  never started, nothing ran: the lane refused it, the device is offline or unknown, the\n" +
			"       device refused to start it (approval denied, permission_denied, a missing --cwd), or\n" +
			"       nothing was sent (the server unreachable, the API key file unreadable)\n" +
			"  130  cancelled with Ctrl-C, confirmed by the device\n" +
			"  254  the lane cancelled the command (its output outran the lane's delivery bound)\n" +
			"  255  the lane lost track (outcome_unknown, a broken stream): the command may have run\n" +
			"    2  usage (an unknown command or flag included)",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("run needs a command after --")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runRun(c, f, args) },
	}
	addClientFlags(c, &f.client)
	c.Flags().StringVar(&f.device, "device", "", "the device id (default $"+EnvDevice+", else your only device)")
	c.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "the device kills the command after this")
	c.Flags().StringVar(&f.cwd, "cwd", "", "the working directory on the device (default its workspace root)")
	return c
}

func runRun(c *cobra.Command, f runFlags, args []string) error {
	if f.timeout < time.Millisecond {
		return usageError{fmt.Errorf("--timeout %v is too short", f.timeout)}
	}
	api, err := f.client.client()
	if err != nil {
		return nothingSent(err)
	}
	defer api.close()
	dev, err := api.pickDevice(c.Context(), f.device)
	if err != nil {
		return err
	}
	cwd := ""
	if f.cwd != "" {
		cwd = remotePath(dev, f.cwd)
	}
	_, err = execStream(c, api, dev.DeviceID, strings.Join(args, " "), cwd, f.timeout, Stdout, Stderr)
	return err
}

// execStream runs one command through the lane, copying its output to
// stdout and stderr as it comes; the error carries the exit code (nil for
// exit 0).
func execStream(c *cobra.Command, api *apiClient, deviceID, command, cwd string, timeout time.Duration, stdout, stderr io.Writer) (result, error) {
	res, err := api.instruct(c.Context(), deviceID, instruction{
		Kind: "execStream", Args: map[string]string{"command": command}, Cwd: cwd, TimeoutMs: timeout.Milliseconds(),
	}, func(kind string, data []byte) error {
		w := stdout
		if kind == "stderr" {
			w = stderr
		}
		w.Write(data) // a closed terminal must not stop the stream: the outcome still matters
		return nil
	})
	if err != nil {
		return res, err
	}
	if err := res.failure("exec"); err != nil {
		return res, refusedToStart(err)
	}
	o := res.Outcome
	if o.Truncated != nil && (o.Truncated.Stdout || o.Truncated.Stderr) {
		fmt.Fprintf(stderr, "sema: the device dropped output past its cap (stdout %v, stderr %v)\n", o.Truncated.Stdout, o.Truncated.Stderr)
	}
	if o.ExitCode == nil {
		return res, &ExitError{Code: ExitLaneFailure, Err: errors.New("the exec outcome carries no exit code")}
	}
	if code := *o.ExitCode; code != 0 {
		if code < 0 || code > 255 {
			code = ExitLaneFailure
		}
		// As kubectl exec does, one line says why sema exits non-zero.
		return res, &ExitError{Code: code, Err: fmt.Errorf("command terminated with exit code %d", *o.ExitCode)}
	}
	return res, nil
}

// refusedToStart turns the device's definite refusal of an exec (exit 1
// for fs: approval denied, permission_denied, a missing or unusable cwd,
// invalid arguments) into never started: an exec failure arm means the
// command was not started, and 1 must stay the command's own exit code.
func refusedToStart(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == ExitFailure {
		return &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("%w (it never started)", ee.Err)}
	}
	return err
}

// nothingSent marks a local failure before anything reached the lane
// (an unreadable key file, a missing local file) as never started; usage
// errors and exits already decided stay as they are.
func nothingSent(err error) error {
	var ee *ExitError
	var ue usageError
	if err == nil || errors.As(err, &ee) || errors.As(err, &ue) {
		return err
	}
	return &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("%w (nothing was sent)", err)}
}
