package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/sandbox"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/protocol"
)

type quickstartFlags struct {
	noPrompt  bool
	workspace string
	listen    string
	timeout   time.Duration
	verbose   bool
}

func newQuickstartCmd() *cobra.Command {
	var f quickstartFlags
	c := &cobra.Command{
		Use:   "quickstart [--no-prompt] [--workspace DIR]",
		Short: "Start a lane server and an executor for this machine on loopback, and show them working",
		Long: "quickstart needs nothing else installed. It starts a lane server (SQLite in a temp dir) on\n" +
			"loopback, enrolls this machine into it and serves it in-process, then shows the lane working:\n" +
			"a streamed command, a file written and read back, governance reads, each with its latency.\n" +
			"Then every line you type runs on this machine through the lane (with line editing and history\n" +
			"on a terminal), until Ctrl-D or exit; Ctrl-C cancels the running command and returns to the\n" +
			"prompt. Everything it created is removed when it ends, also on SIGINT before the prompt,\n" +
			"SIGTERM, SIGHUP and SIGPIPE.\n" +
			"--workspace is the executor's workspace root: where commands run (default the current dir).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runQuickstart(c, f) },
	}
	c.Flags().BoolVar(&f.noPrompt, "no-prompt", false, "run the demonstration and exit")
	c.Flags().StringVar(&f.workspace, "workspace", ".", "the executor's workspace root")
	c.Flags().StringVar(&f.listen, "listen", "127.0.0.1:0", "the lane server's address")
	c.Flags().DurationVar(&f.timeout, "timeout", client.DefaultCommandTimeout, "the time limit of each typed command")
	c.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "show the lane's and the executor's logs")
	return c
}

// quickstart is one run: everything it started, to be stopped in reverse.
type quickstart struct {
	c    *cobra.Command // its context ends when quickstart must end
	quit context.CancelFunc
	// interrupt, when not nil, takes a Ctrl-C instead of quit (see prompt).
	interrupt atomic.Pointer[func()]
	f         quickstartFlags
	tmp       string
	log       *slog.Logger
	cleanup   []func()
	api       *client.Client
	key       string // the throwaway API key of api
	dev       api.Device
}

func (q *quickstart) onClose(f func()) { q.cleanup = append(q.cleanup, f) }

func (q *quickstart) close() {
	for i := len(q.cleanup) - 1; i >= 0; i-- {
		q.cleanup[i]()
	}
}

// step runs one demonstration step and prints its line with its latency.
func (q *quickstart) step(name string, do func() (string, error)) error {
	start := time.Now()
	detail, err := do()
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		fmt.Fprintf(Stdout, "  ✗ %8s     %-15s %s\n", "", name, safetext.String(err.Error()))
		return fmt.Errorf("quickstart: %s: %w", name, err)
	}
	fmt.Fprintf(Stdout, "  ✓ %8.1f ms  %-15s %s\n", ms, name, safetext.String(detail))
	return nil
}

func runQuickstart(c *cobra.Command, f quickstartFlags) error {
	ws, err := filepath.Abs(f.workspace)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return usageError{fmt.Errorf("--workspace %s is not a directory", f.workspace)}
	}
	tmp, err := os.MkdirTemp("", "sema-quickstart-")
	if err != nil {
		return err
	}
	q := &quickstart{c: c, f: f, tmp: tmp, log: slog.New(slog.DiscardHandler)}
	if f.verbose {
		q.log = newLogger(true)
	}
	q.onClose(func() { os.RemoveAll(tmp) })
	defer q.close()
	// The signals are quickstart's own, so that its temp dir (with a
	// device key in it) goes whatever ends it; Ctrl-C at the prompt only
	// cancels the command that runs.
	stop := q.handleSignals()
	defer stop()
	fmt.Fprintln(Stdout, "sema quickstart: a lane server and an executor for this machine, on loopback.")
	fmt.Fprintln(Stdout)
	if err := q.start(ws); err != nil {
		return err
	}
	if err := q.demonstrate(); err != nil {
		return err
	}
	q.explain()
	if f.noPrompt {
		return nil
	}
	return q.prompt()
}

// start brings up the lane server, enrolls this machine and serves it.
func (q *quickstart) start(ws string) error {
	ctx := q.c.Context()
	var (
		srv    *lane.Server
		apiKey string
	)
	err := q.step("lane server", func() (string, error) {
		st, err := sqlite.Open(ctx, filepath.Join(q.tmp, "server"))
		if err != nil {
			return "", err
		}
		q.onClose(func() { st.Close() })
		if _, apiKey, err = lane.CreateAdminIdentity(ctx, st, "quickstart"); err != nil {
			return "", err
		}
		if srv, err = lane.New(lane.Config{Store: st, Logger: q.log}); err != nil {
			return "", err
		}
		q.onClose(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		})
		ln, err := net.Listen("tcp", q.f.listen)
		if err != nil {
			return "", err
		}
		hs := newHTTPServer(httpapi.New(srv), q.log, false)
		served := make(chan struct{})
		go func() {
			defer close(served)
			hs.Serve(ln)
		}()
		q.onClose(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			hs.Shutdown(sctx)
			<-served
		})
		q.key = apiKey
		if q.api, err = client.New("http://"+ln.Addr().String(), apiKey); err != nil {
			return "", err
		}
		q.onClose(q.api.Close)
		return q.api.BaseURL() + ", SQLite in " + q.tmp, nil
	})
	if err != nil {
		return err
	}

	stateDir := filepath.Join(q.tmp, "device")
	var rec device.Record
	err = q.step("enroll", func() (string, error) {
		tok, err := q.api.EnrollToken(ctx)
		if err != nil {
			return "", err
		}
		host, _ := os.Hostname()
		rec, err = device.Enroll(ctx, device.EnrollOptions{
			Server: q.api.BaseURL(), Token: tok.Token, APIKey: apiKey, WorkspaceRoot: ws,
			DisplayName: host, StateDir: stateDir, HTTPClient: q.api.HTTPClient(), Logger: q.log,
		})
		if err != nil {
			return "", err
		}
		return rec.DeviceID + " (key made here, public key registered)", nil
	})
	if err != nil {
		return err
	}

	return q.step("connect", func() (string, error) {
		key, err := device.LoadKey(stateDir)
		if err != nil {
			return "", err
		}
		lock, _, err := device.AcquireLock(stateDir, filepath.Join(q.tmp, "locks"), rec.DeviceID)
		if err != nil {
			return "", err
		}
		q.onClose(lock.Release)
		if err := os.Mkdir(q.tempKinds(), 0o700); err != nil {
			return "", err
		}
		env := containment(rec.WorkspaceRoot, q.tempKinds(), nil, stateDir, lock)
		if env.Sandbox, err = q.sandbox(rec.WorkspaceRoot, stateDir); err != nil {
			return "", err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		hc := &http.Client{Transport: tr}
		rt, err := executor.New(executor.Config{
			DeviceID: rec.DeviceID, Key: key, Server: rec.Server, WorkspaceRoot: rec.WorkspaceRoot,
			Ops:        env,
			HTTPClient: hc, Logger: q.log, StatusPath: filepath.Join(stateDir, device.StatusFile), ExecutorVersion: version(),
		})
		if err != nil {
			return "", err
		}
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		go func() { done <- rt.Run(rctx) }()
		q.onClose(func() {
			stop() // goodbye, then the executor ends its work
			<-done
			hc.CloseIdleConnections()
		})
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(15 * time.Second)
		for {
			if p := srv.Presence(rec.DeviceID); p.Online {
				q.dev = api.Device{DeviceID: rec.DeviceID, WorkspaceRoot: rec.WorkspaceRoot}
				return fmt.Sprintf("online, gen %s, epoch %s; commands run in the %s sandbox", p.Gen, rt.Epoch(), env.Sandbox.Policy().Mode), nil
			}
			select {
			case err := <-done:
				done <- err
				return "", fmt.Errorf("the executor stopped: %v", err)
			case <-deadline:
				return "", errors.New("the executor did not come online within 15 s")
			case <-ctx.Done():
				return "", ctx.Err()
			case <-tick.C:
			}
		}
	})
}

// demonstrate shows the lane working: a streamed command, a file written
// and read back, two governance reads.
func (q *quickstart) demonstrate() error {
	ctx := q.c.Context()
	fmt.Fprintln(Stdout)
	command := `echo "hello from $(uname -sn)"; for i in 1 2 3; do echo "tick $i"; sleep 0.05; done; echo "(this line is stderr)" >&2`
	err := q.step("execStream", func() (string, error) {
		out := &prefixWriter{w: Stdout, prefix: "                 │ "}
		_, err := execStream(ctx, q.api, q.dev.DeviceID, execCommand(command, 30*time.Second), execOutput{stdout: out, stderr: out})
		out.flush()
		if err != nil {
			return "", err
		}
		return "exit 0, output streamed as it came", nil
	})
	if err != nil {
		return err
	}
	dir := filepath.Join(q.tempKinds(), "demo") // inside containment, as every path must be
	file := filepath.Join(dir, "hello.txt")
	content := []byte("hello from sema quickstart\n")
	yes := true
	run := func(kind protocol.InstructionKind, args any, data []byte, want protocol.OutcomeKind, sink chunkSink) (api.Outcome, error) {
		fc := fsCall{c: q.c, lc: q.api, dev: q.dev, f: &fsFlags{timeout: 30 * time.Second}}
		return fc.run(kind, args, data, want, sink)
	}
	steps := []struct {
		name string
		do   func() (string, error)
	}{
		{"createDir", func() (string, error) {
			_, err := run(protocol.KindCreateDir, protocol.DirArgs{Path: dir, Recursive: &yes}, nil, protocol.OutcomeVoid, nil)
			return dir, err
		}},
		{"writeFile", func() (string, error) {
			o, err := run(protocol.KindWriteFile, api.WriteArgs{Path: file}, content, protocol.OutcomeWrite, nil)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s, atomically; receipt: %s inode %s", words.Bytes(len(content)), o.CanonicalPath, o.Inode), nil
		}},
		{"readBinaryFile", func() (string, error) {
			var got bytes.Buffer
			_, err := run(protocol.KindReadBinaryFile, protocol.PathArgs{Path: file}, nil, protocol.OutcomeRead, func(_ protocol.ChunkKind, b []byte) error {
				got.Write(b)
				return nil
			})
			if err != nil {
				return "", err
			}
			if !bytes.Equal(got.Bytes(), content) {
				return "", fmt.Errorf("read back %q, wrote %q", got.Bytes(), content)
			}
			return fmt.Sprintf("%s, identical to what was written", words.Bytes(got.Len())), nil
		}},
		{"canonicalPath", func() (string, error) {
			o, err := run(protocol.KindCanonicalPath, protocol.PathArgs{Path: file}, nil, protocol.OutcomeStat, nil)
			return o.CanonicalPath + " (the device's real path)", err
		}},
		{"exists", func() (string, error) {
			o, err := run(protocol.KindExists, protocol.PathArgs{Path: file + ".missing"}, nil, protocol.OutcomeStat, nil)
			if err == nil && o.ExistsValue == nil {
				err = errors.New("no existsValue")
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%v for %s.missing (never a guess)", *o.ExistsValue, filepath.Base(file)), nil
		}},
	}
	for _, s := range steps {
		if err := q.step(s.name, s.do); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// explain prints how to use the running lane and how to connect another
// machine to a real one.
func (q *quickstart) explain() {
	if !q.f.noPrompt {
		fmt.Fprintf(Stdout, "\nThe lane works. While this runs, try it from another terminal (this lane and its key are throwaway):\n\n"+
			"    export %s=%s %s=%s\n    sema devices\n    sema run -- uname -a\n    sema fs ls .\n",
			EnvServer, q.api.BaseURL(), EnvAPIKey, q.key)
	} else {
		fmt.Fprintln(Stdout, "\nThe lane works.")
	}
	keyFile := "<data>/" + AdminKeyFile
	if dir, err := serverDataDir(""); err == nil {
		keyFile = filepath.Join(dir, AdminKeyFile)
	}
	fmt.Fprintf(Stdout, `
To connect another machine, run a lane server it can reach (its first start prints an admin API key):

    sema server --listen 0.0.0.0:8420 --public-url http://THIS-HOST:8420
    sema login --server http://THIS-HOST:8420 < %s
    sema token

then run the line it prints on the other machine (the token is its credential: no API key needed
there), and serve:

    sema device enroll --server http://THIS-HOST:8420 --token set_… --workspace ~
    sema device serve            (or, to keep it running: sema device service install --now)
`, shellQuote(keyFile))
}

// prefixWriter indents streamed output, line by line, as it comes.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !p.midLine {
			io.WriteString(p.w, p.prefix)
		}
		p.w.Write(line)
		p.midLine = line[len(line)-1] != '\n'
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	if p.midLine {
		io.WriteString(p.w, "\n")
		p.midLine = false
	}
}

// tempKinds is the quickstart executor's directory for temporary files
// made through the lane: one of its allowed roots, removed with the rest.
func (q *quickstart) tempKinds() string { return filepath.Join(q.tmp, "tmp") }

// sandbox is serve's default sandbox for the demonstration's executor. Where
// this kernel cannot enforce it, the demonstration says so and runs the
// commands unconfined, as `sema device serve --sandbox off` would.
func (q *quickstart) sandbox(workspace, stateDir string) (*sandbox.Sandbox, error) {
	roots := sandboxRoots{workspace: workspace, tempDir: q.tempKinds(), stateDir: stateDir}
	sb, err := sandboxFlags{mode: string(sandbox.WorkspaceWrite), network: "on"}.build(roots)
	if err == nil {
		return sb, nil
	}
	fmt.Fprintf(Stdout, "  ! the default sandbox cannot run here, so commands run unconfined: %s\n", safetext.String(err.Error()))
	return sandboxFlags{mode: string(sandbox.Off), network: "on"}.build(roots)
}
