package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/nexting"
)

type simFlags struct {
	listen     string
	deviceInfo string
}

func newNextingSimCmd() *cobra.Command {
	var f simFlags
	c := &cobra.Command{
		Use:   "sim [--listen unix:PATH] [--device-info FILE]",
		Short: "A terminal approval device: answer `sema device serve --approve` by keyboard",
		Long: "sim is a simulated nexting approval device. It listens on a unix socket (mode 0600) for one host\n" +
			"at a time — `sema device serve --approve unix:PATH` — shows the pending request with its\n" +
			"remaining TTL, and the status slots.\n\n" +
			"Keys: a or y allows, d or n denies, q quits. On a terminal, keys act at once (the terminal is\n" +
			"put in cbreak mode and restored on exit) and the screen is redrawn every second; otherwise\n" +
			"input is read as it comes (a line such as \"a\" works) and every change is printed as one line.\n" +
			"The default socket is $XDG_RUNTIME_DIR/sema-nexting-sim.sock, or sema-nexting-sim-UID.sock\n" +
			"in the temporary directory.",
		Args: nextingNoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runSim(c.Context(), f) },
	}
	c.Flags().StringVar(&f.listen, "listen", "", "where to listen: unix:PATH")
	c.Flags().StringVar(&f.deviceInfo, "device-info", "", "declare this Device Info (approval/1 and status/1 only) instead of the default")
	return c
}

// defaultSimSocket is where sim listens without --listen.
func defaultSimSocket() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sema-nexting-sim.sock")
	}
	return filepath.Join(os.TempDir(), "sema-nexting-sim-"+strconv.Itoa(os.Getuid())+".sock")
}

func runSim(ctx context.Context, f simFlags) error {
	path := defaultSimSocket()
	if f.listen != "" {
		p, ok := strings.CutPrefix(f.listen, "unix:")
		if !ok || p == "" {
			return usageError{fmt.Errorf("--listen %q: want unix:PATH", f.listen)}
		}
		path = p
	}
	var info []byte
	if f.deviceInfo != "" {
		raw, err := readLimited(f.deviceInfo, nil)
		if err != nil {
			return err
		}
		info = []byte(strings.TrimSpace(string(raw)))
	}
	sim, err := nexting.NewSim(info)
	if err != nil {
		return fmt.Errorf("simulator Device Info: %w", err)
	}
	ln, err := listenSim(path)
	if err != nil {
		return err
	}
	defer ln.Close()

	accepted := make(chan net.Conn)
	acceptDone, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c:
			case <-quit:
				c.Close()
				return
			}
		}
	}()
	defer func() {
		close(quit)
		ln.Close()
		<-acceptDone
	}()

	restore := cbreak(Stdin)
	defer restore()
	keys := make(chan byte)
	stopKeys := make(chan struct{})
	defer close(stopKeys)
	go readKeys(Stdin, keys, stopKeys)

	ui := newSimUI(Stdout, isTerminal(Stdout), "unix:"+path, sim.Info().Model)
	ui.note("listening on unix:" + path + " — run: sema device serve --approve unix:" + path)
	var (
		cur     *nexting.SimConn
		changed <-chan struct{}
		ended   <-chan struct{}
	)
	closeConn := func() {
		if cur != nil {
			cur.Close()
			cur, changed, ended = nil, nil, nil
		}
	}
	defer closeConn()
	var tick <-chan time.Time
	if ui.tty {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	ui.render(nil)
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-accepted:
			if cur != nil {
				c.Close()
				ui.note("refused another host: one host at a time")
				continue
			}
			cur = nexting.ServeSim(c, sim, nil)
			changed, ended = cur.Changed(), cur.Done()
			ui.note("host connected")
		case <-changed:
			v := cur.View()
			ui.render(&v)
		case <-ended:
			err := cur.Err()
			closeConn()
			if errors.Is(err, io.EOF) || errors.Is(err, nexting.ErrClosed) {
				ui.note("host disconnected")
			} else {
				ui.note("host disconnected: " + err.Error())
			}
			ui.render(nil)
		case <-tick:
			if cur != nil {
				v := cur.View()
				ui.render(&v)
			} else {
				ui.render(nil)
			}
		case k, ok := <-keys:
			if !ok {
				keys = nil
				ui.note("stdin closed: keys no longer work; stop with Ctrl-C")
				continue
			}
			var ch nexting.Choice
			switch k {
			case 'a', 'A', 'y', 'Y':
				ch = nexting.ChoiceAllow
			case 'd', 'D', 'n', 'N':
				ch = nexting.ChoiceDeny
			case 'q', 'Q':
				ui.note("quit")
				return nil
			default:
				continue
			}
			switch {
			case cur == nil:
				ui.note("no host connected: nothing to answer")
			case cur.Press(ch):
				ui.note("pressed " + string(ch))
			default:
				ui.note("nothing to answer (no pending request)")
			}
		}
	}
}

// listenSim listens on a unix socket at path, readable and writable by
// this user only. A stale socket file (nobody answering) is replaced; a
// live one is an error.
func listenSim(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("something already listens on %s (another simulator?)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// readKeys sends every byte read from r on keys, and closes keys at EOF or
// on an error. It returns after a q (the quit key needs no more input) or
// once stop is closed. A Read blocked on a terminal cannot be interrupted:
// when the simulator ends another way (Ctrl-C), the goroutine ends with the
// process.
func readKeys(r io.Reader, keys chan<- byte, stop <-chan struct{}) {
	buf := make([]byte, 64)
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			select {
			case keys <- b:
			case <-stop:
				return
			}
			if b == 'q' || b == 'Q' {
				return
			}
		}
		if err != nil {
			close(keys)
			return
		}
	}
}

// simUI draws the simulator: on a terminal, the whole screen after each
// change and every second; otherwise one line per fact that changed.
type simUI struct {
	w      io.Writer
	tty    bool
	where  string
	model  string
	notice string
	last   map[string]string // line mode: the last printed value of each fact
}

func newSimUI(w io.Writer, tty bool, where, model string) *simUI {
	return &simUI{w: w, tty: tty, where: where, model: model, last: map[string]string{}}
}

func (u *simUI) note(s string) {
	u.notice = s
	if !u.tty {
		fmt.Fprintln(u.w, s)
	}
}

// facts are what the device shows, one line each, without the remaining
// time (which changes every instant).
func simFacts(v *nexting.SimView) (prompt, status string) {
	switch {
	case v == nil:
		prompt = "no host connected"
	case v.State == nexting.DeviceIdle:
		prompt = "idle"
	case v.State == nexting.DevicePending:
		prompt = "pending " + v.ID + ": " + safetext.String(v.Summary)
	default:
		prompt = "answered " + string(v.Choice) + " to " + v.ID + ", waiting for resolved: " + safetext.String(v.Summary)
	}
	if v == nil || len(v.Status) == 0 {
		return prompt, "status: (empty)"
	}
	parts := make([]string, len(v.Status))
	for i, a := range v.Status {
		parts[i] = fmt.Sprintf("[%d %s %s]", a.Slot, a.State, safetext.String(a.Label))
	}
	return prompt, "status: " + strings.Join(parts, " ")
}

func (u *simUI) render(v *nexting.SimView) {
	prompt, status := simFacts(v)
	if !u.tty {
		for _, kv := range [][2]string{{"prompt", prompt}, {"status", status}} {
			if u.last[kv[0]] != kv[1] {
				u.last[kv[0]] = kv[1]
				line := kv[1]
				if kv[0] == "prompt" && v != nil && v.State == nexting.DevicePending {
					line += fmt.Sprintf(" (ttl %.1fs)", v.Remaining.Seconds())
				}
				fmt.Fprintln(u.w, line)
			}
		}
		return
	}
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	fmt.Fprintf(&b, "nexting simulator (%s) on %s\n\n", safetext.String(u.model), u.where)
	switch {
	case v == nil:
		b.WriteString("  waiting for a host to connect\n")
	case v.State == nexting.DeviceIdle:
		b.WriteString("  no request\n")
	case v.State == nexting.DevicePending:
		fmt.Fprintf(&b, "  REQUEST %s — %ds left\n\n    %s\n\n  [a] allow    [d] deny\n", v.ID, int(v.Remaining.Round(time.Second)/time.Second), safetext.String(v.Summary))
	default:
		fmt.Fprintf(&b, "  REQUEST %s — answered %s, waiting for the host (%ds left)\n\n    %s\n", v.ID, v.Choice, int(v.Remaining.Round(time.Second)/time.Second), safetext.String(v.Summary))
	}
	b.WriteString("\n  status slots:\n")
	if v == nil || len(v.Status) == 0 {
		b.WriteString("    (empty)\n")
	} else {
		for _, a := range v.Status {
			fmt.Fprintf(&b, "    %d  %-11s %s\n", a.Slot, a.State, safetext.String(a.Label))
		}
	}
	if v != nil && v.LastError.Code != "" {
		fmt.Fprintf(&b, "\n  last error from the host: %s\n", v.LastError.Code)
	}
	fmt.Fprintf(&b, "\n  keys: a/y allow · d/n deny · q quit\n  %s\n", u.notice)
	io.WriteString(u.w, b.String())
}
