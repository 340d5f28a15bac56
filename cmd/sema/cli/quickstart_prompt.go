package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/sema-agent/sema/internal/safetext"
)

// handleSignals makes SIGINT, SIGTERM, SIGHUP and SIGPIPE end quickstart
// through its cleanup (a SIGPIPE, once notified, also turns a write to a
// closed stdout into an error rather than death), except that a SIGINT
// goes to q.interrupt when one is set. The returned func stops it.
func (q *quickstart) handleSignals() (stop func()) {
	ctx, quit := context.WithCancel(context.WithoutCancel(q.c.Context()))
	q.c.SetContext(ctx)
	q.quit = quit
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case s := <-sigs:
				if f := q.interrupt.Load(); s == os.Interrupt && f != nil {
					(*f)()
					continue
				}
				quit()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		quit()
	}
}

// errInterrupted is a Ctrl-C typed at the prompt.
var errInterrupted = errors.New("interrupted")

// lineSource is what the prompt reads lines from.
type lineSource interface {
	// next returns the next line: io.EOF at the end, errInterrupted for a
	// Ctrl-C typed instead of a line.
	next() (string, error)
	// prompts reports whether next shows the prompt itself.
	prompts() bool
	// close gives the terminal back as it was.
	close()
}

// prompt runs every line typed through the lane until EOF, Ctrl-D or
// exit. Ctrl-C cancels the command that runs, or the line being typed,
// and the prompt comes back.
func (q *quickstart) prompt() error {
	ctx := q.c.Context()
	fmt.Fprintln(Stdout, "\nType a command to run it on this machine through the lane; Ctrl-C cancels it, Ctrl-D quits.")
	src := newLineSource()
	defer src.close()
	showPrompt := func() {
		if !src.prompts() {
			fmt.Fprint(Stdout, "sema> ")
		}
	}
	type read struct {
		line string
		err  error
	}
	// One reader at a time: it ends with its line, or with the process.
	lines := make(chan read, 1)
	reading := false
	intr := make(chan struct{}, 1)
	var mu sync.Mutex
	var cancelCmd context.CancelFunc
	interrupt := func() {
		mu.Lock()
		defer mu.Unlock()
		if cancelCmd != nil {
			cancelCmd()
			return
		}
		select {
		case intr <- struct{}{}:
		default:
		}
	}
	q.interrupt.Store(&interrupt)
	defer q.interrupt.Store(nil)
	for {
		if !reading {
			reading = true
			showPrompt()
			go func() {
				line, err := src.next()
				lines <- read{line, err}
			}()
		}
		var r read
		select {
		case r = <-lines:
			reading = false
		case <-intr: // a Ctrl-C (SIGINT) at a prompt that reads a pipe
			fmt.Fprintln(Stdout, "^C")
			showPrompt()
			continue
		case <-ctx.Done():
			fmt.Fprintln(Stdout)
			return nil
		}
		switch {
		case errors.Is(r.err, errInterrupted):
			fmt.Fprintln(Stdout, "^C")
			continue
		case r.err != nil:
			fmt.Fprintln(Stdout)
			return nil
		}
		line := strings.TrimSpace(r.line)
		switch line {
		case "":
			continue
		case "exit", "quit":
			return nil
		}
		cmdCtx, cancel := context.WithCancel(ctx)
		mu.Lock()
		cancelCmd = cancel
		mu.Unlock()
		start := time.Now()
		_, err := execStream(cmdCtx, q.api, q.dev.DeviceID, execCommand(line, q.f.timeout), execOutput{stdout: Stdout, stderr: Stderr, notice: newWaitNotice()})
		mu.Lock()
		cancelCmd = nil
		mu.Unlock()
		cancel()
		ms := float64(time.Since(start).Microseconds()) / 1000
		var ee *ExitError
		switch {
		case err == nil:
			fmt.Fprintf(Stdout, "[exit 0 · %.1f ms]\n", ms)
		case errors.As(err, &ee) && ee.Quiet:
			fmt.Fprintf(Stdout, "[exit %d · %.1f ms]\n", ee.Code, ms)
		default:
			fmt.Fprintf(Stdout, "[%s · %.1f ms]\n", safetext.String(err.Error()), ms)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// newLineSource reads the terminal with line editing and history when
// stdin and stdout are one, else plain lines.
func newLineSource() lineSource {
	in, inOK := Stdin.(*os.File)
	out, outOK := Stdout.(*os.File)
	if inOK && outOK && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd())) {
		return &termLines{fd: int(in.Fd()), rw: struct {
			io.Reader
			io.Writer
		}{in, out}, editor: newLineEditor()}
	}
	sc := bufio.NewScanner(Stdin)
	return scanLines{sc}
}

// scanLines are the lines of a stdin that is not a terminal.
type scanLines struct{ sc *bufio.Scanner }

func (s scanLines) next() (string, error) {
	if s.sc.Scan() {
		return s.sc.Text(), nil
	}
	if err := s.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

func (scanLines) prompts() bool { return false }

func (scanLines) close() {}

// termLines reads a terminal in raw mode, one line at a time, through
// golang.org/x/term's line editor (arrows, history, Ctrl-A/E/K/U/W); the
// terminal is back in its own mode while a command runs, so that Ctrl-C
// is SIGINT there.
type termLines struct {
	fd     int
	rw     io.ReadWriter
	editor *lineEditor

	mu     sync.Mutex
	old    *term.State // while in raw mode
	closed bool
}

func (t *termLines) next() (string, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return "", io.EOF
	}
	old, err := term.MakeRaw(t.fd)
	t.old = old
	t.mu.Unlock()
	if err != nil {
		return "", err
	}
	defer t.cooked()
	return t.editor.readLine(t.rw)
}

func (*termLines) prompts() bool { return true }

// cooked gives the terminal its own mode back.
func (t *termLines) cooked() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.restoreLocked()
}

func (t *termLines) restoreLocked() {
	if t.old != nil {
		term.Restore(t.fd, t.old)
		t.old = nil
	}
}

func (t *termLines) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.restoreLocked()
	t.closed = true
}

// lineEditor is x/term's Terminal with the history kept across lines and
// a Ctrl-C told apart from a Ctrl-D (the Terminal ends its line with
// io.EOF on both).
type lineEditor struct {
	history term.History
}

func newLineEditor() *lineEditor { return &lineEditor{} }

// readLine reads one line from rw, a terminal in raw mode.
func (e *lineEditor) readLine(rw io.ReadWriter) (string, error) {
	in := &ctrlCWatch{r: rw}
	// A Terminal per line: one ended by Ctrl-C keeps the line it had.
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{in, rw}, "sema> ")
	if e.history != nil {
		t.History = e.history
	}
	e.history = t.History
	line, err := t.ReadLine()
	if errors.Is(err, io.EOF) && in.saw {
		return "", errInterrupted
	}
	return line, err
}

// ctrlCWatch notes a Ctrl-C (ETX) among the bytes read.
type ctrlCWatch struct {
	r   io.Reader
	saw bool
}

func (w *ctrlCWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if strings.IndexByte(string(p[:n]), 3) >= 0 {
		w.saw = true
	}
	return n, err
}
