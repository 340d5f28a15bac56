package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

type runFlags struct {
	client  clientFlags
	device  string
	timeout time.Duration
	cwd     string
	env     []string
	noStdin bool
	verbose bool
	json    bool
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [flags] COMMAND [ARG…]",
		Short: "Run a command on a device through the lane, streaming its output, with its exit code",
		Long: "run sends COMMAND (its words joined by spaces, run by the device's /bin/sh -c, as ssh does)\n" +
			"to the device as execStream, writes its stdout and stderr here as they come, and exits with\n" +
			"the command's exit code. Ctrl-C cancels it on the device and waits for the confirmation.\n" +
			"sema's own flags come before the command: every word from the first word of the command on\n" +
			"belongs to the command (sema run uname -a); -- before the command is accepted too.\n" +
			"A relative --cwd is taken from the device's workspace root.\n\n" +
			"stdin: when it is not a terminal (a pipe, a file), run reads it to its end first, uploads it to\n" +
			"a temporary file on the device and runs the command with that file as its stdin; the file is\n" +
			"removed afterwards. It is not interactive: the protocol has no stdin channel. An empty stdin\n" +
			"uploads nothing; -n (--no-stdin) does not read stdin at all (as ssh -n). On a terminal, stdin is\n" +
			"not read and the command's stdin is /dev/null.\n\n" +
			"On a terminal, run says so when the device stays silent (it may be holding the command for\n" +
			"approval) and while Ctrl-C waits for the device to confirm.\n\n" +
			"Exit codes when the command did not simply exit:\n" +
			"  124  timeout: the device killed the command at --timeout\n" +
			"  125  never started, nothing ran: the lane refused it, the device is offline or unknown, the\n" +
			"       device refused to start it (approval denied, permission_denied, a missing --cwd), or\n" +
			"       nothing was sent (the server unreachable, the API key file unreadable)\n" +
			"  130  cancelled with Ctrl-C, confirmed by the device\n" +
			"  254  the lane cancelled the command (its output outran the lane's delivery bound)\n" +
			"  255  the lane lost track (outcome_unknown, a broken stream, a connection that broke after\n" +
			"       the request was sent): the command may have run\n" +
			"    2  usage (an unknown command or flag included)",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("run needs a command")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runRun(c, f, args) },
	}
	// Flags end at the command's first word, as ssh's do.
	c.Flags().SetInterspersed(false)
	addClientFlags(c, &f.client)
	addDeviceFlag(c, &f.device)
	c.Flags().DurationVar(&f.timeout, "timeout", client.DefaultCommandTimeout, "the device kills the command after this")
	c.Flags().StringVar(&f.cwd, "cwd", "", "the working directory on the device (default its workspace root)")
	c.Flags().StringArrayVar(&f.env, "env", nil, "set the variable K to V in the command's environment (K=V, repeatable)")
	c.Flags().BoolVarP(&f.noStdin, "no-stdin", "n", false, "do not read stdin (the command's stdin is /dev/null)")
	c.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "say it on stderr when the command exits non-zero")
	c.Flags().BoolVar(&f.json, "json", false, "print the lane's NDJSON events (accepted, chunks, outcome) as they come, instead of the output")
	return c
}

// shellEnv parses --env's K=V pairs; a later K wins.
func shellEnv(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--env %q: want K=V", p)}
		}
		env[k] = v
	}
	return env, nil
}

func runRun(c *cobra.Command, f runFlags, args []string) error {
	if f.timeout < time.Millisecond {
		return usageError{fmt.Errorf("--timeout %v is too short", f.timeout)}
	}
	env, err := shellEnv(f.env)
	if err != nil {
		return err
	}
	lc, err := f.client.client()
	if err != nil {
		return nothingSent(err)
	}
	defer lc.Close()
	dev, err := pickDevice(c.Context(), lc, f.device)
	if err != nil {
		return err
	}
	cwd := ""
	if f.cwd != "" {
		cwd = remotePath(dev, f.cwd)
	}
	command := strings.Join(args, " ")
	if !f.noStdin && !stdinIsTerminal() {
		in, err := uploadStdin(c, lc, dev, f.timeout)
		if err != nil {
			return err
		}
		defer in.remove()
		command = in.wrap(command)
	}
	in := api.InstructionRequest{
		Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: command}, Cwd: cwd, ShellEnv: env, TimeoutMs: f.timeout.Milliseconds(),
	}
	var events io.Writer
	if f.json {
		events = Stdout
	}
	_, err = execStream(c.Context(), lc, dev.DeviceID, in, execOutput{stdout: Stdout, stderr: Stderr, events: events, notice: newWaitNotice()})
	err = tildeNote(err, f.cwd)
	var ee *ExitError
	if f.verbose && errors.As(err, &ee) {
		ee.Quiet = false
	}
	return err
}

// execCommand is the execStream instruction of a command with no cwd and
// no environment of its own.
func execCommand(command string, timeout time.Duration) api.InstructionRequest {
	return api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: command}, TimeoutMs: timeout.Milliseconds()}
}

// deviceLinePrefix starts a "device" line of the lane's stream.
var deviceLinePrefix = []byte(`{"event":"` + api.EventDevice + `"`)

// execOutput is where execStream writes: the command's stdout and stderr,
// or, when events is not nil, the lane's event lines instead. notice, when
// not nil, tells the terminal why it is silent.
type execOutput struct {
	stdout, stderr, events io.Writer
	notice                 *waitNotice
}

// execStream runs one execStream instruction through the lane, copying its
// output as it comes; the error carries the exit code (nil for exit 0),
// and is Quiet when that code is the command's own.
func execStream(ctx context.Context, lc *client.Client, deviceID string, in api.InstructionRequest, out execOutput) (client.Result, error) {
	notice, stderr := out.notice, out.stderr
	defer notice.end()
	sink := client.Sink{
		Accepted:   notice.accepted,
		Cancelling: notice.cancelling,
		Chunk: func(kind protocol.ChunkKind, data []byte) error {
			notice.beforeOutput()
			w := out.stdout
			if kind == protocol.ChunkStderr {
				w = stderr
			}
			w.Write(data) // a closed terminal must not stop the stream: the outcome still matters
			return nil
		},
	}
	if notice != nil {
		sink.Device = notice.device
	}
	if out.events != nil {
		sink.Chunk = func(protocol.ChunkKind, []byte) error { notice.beforeOutput(); return nil }
		sink.Line = func(line []byte) {
			if !bytes.HasPrefix(line, deviceLinePrefix) { // asked for the terminal, not part of --json
				out.events.Write(line)
			}
		}
	}
	res, err := instruct(ctx, lc, deviceID, in, sink)
	notice.end()
	if err != nil {
		return res, err
	}
	if err := failure(res, protocol.OutcomeExec); err != nil {
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
		own := code > 0 && code <= 255
		if !own {
			code = ExitLaneFailure
		}
		// As ssh does, the command's own exit code says enough; -v says it
		// in words too, as kubectl exec does.
		return res, &ExitError{Code: code, Err: fmt.Errorf("command terminated with exit code %d", *o.ExitCode), Quiet: own}
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
		return &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("%w%s", ee.Err, neverStartedNote(ee.Err.Error()))}
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
