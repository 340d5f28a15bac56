package cli

import (
	"io"
	"sync"
	"time"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/words"
)

// waitNoticeAfter is how long run stays silent after the lane took the
// command before it says why.
const waitNoticeAfter = 1500 * time.Millisecond

// Status lines of sema run on a terminal.
const (
	// The protocol gives the lane no signal that the device holds an
	// instruction for approval (the device's frames are a closed set,
	// §2.2), so this says what is known: nothing came yet.
	waitingLine    = "sema: waiting for the device… (no output yet; it may be holding the command for approval)"
	cancellingLine = "sema: cancelling… (waiting for the device to confirm)"
)

// waitNotice shows one status line on the terminal while run is silent:
// "waiting…" once the lane took the command and no output came for
// waitNoticeAfter, "cancelling…" after Ctrl-C. The line is erased before
// any output is written and at the end. A nil *waitNotice shows nothing.
type waitNotice struct {
	w   io.Writer
	clk clock.Clock

	mu     sync.Mutex
	timer  clock.Timer
	output bool // output came: no more waiting line
	shown  bool
	ended  bool
}

// newWaitNotice returns the notice of run, or nil when stderr is not a
// terminal.
func newWaitNotice() *waitNotice {
	if !stderrIsTerminal() {
		return nil
	}
	return &waitNotice{w: Stderr, clk: uiClock}
}

// accepted starts the wait for output.
func (n *waitNotice) accepted(string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ended && !n.output {
		n.timer = n.clk.AfterFunc(waitNoticeAfter, n.silent)
	}
}

func (n *waitNotice) silent() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ended && !n.output && !n.shown {
		n.showLocked(waitingLine)
	}
}

// beforeOutput erases the line: output follows.
func (n *waitNotice) beforeOutput() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.output = true
	n.stopLocked()
	n.eraseLocked()
}

// cancelling says that Ctrl-C waits for the device.
func (n *waitNotice) cancelling() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
	if !n.ended {
		n.showLocked(cancellingLine)
	}
}

// device says that the device's connection dropped and how long the lane
// waits for it, or erases that once it is back.
func (n *waitNotice) device(connected bool, grace time.Duration) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ended {
		return
	}
	if connected {
		n.eraseLocked()
		return
	}
	n.stopLocked()
	n.showLocked(disconnectedLine(grace))
}

// disconnectedLine is what run shows while the lane waits for a device
// whose connection dropped (§5 R4: the reconnect grace).
func disconnectedLine(grace time.Duration) string {
	seconds := int64(grace.Round(time.Second) / time.Second)
	return "sema: the device disconnected; waiting up to " + words.Count(seconds, "second", "seconds") + " for it to come back"
}

// end erases the line for good.
func (n *waitNotice) end() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
	n.eraseLocked()
	n.ended = true
}

func (n *waitNotice) showLocked(line string) {
	io.WriteString(n.w, "\r"+line+"\x1b[K")
	n.shown = true
}

func (n *waitNotice) eraseLocked() {
	if n.shown {
		io.WriteString(n.w, clearLine)
		n.shown = false
	}
}

func (n *waitNotice) stopLocked() {
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
}
