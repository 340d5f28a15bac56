package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

// progressEvery is how often the progress line is redrawn at most.
const progressEvery = 200 * time.Millisecond

// progress is the one-line transfer status of fs put and get on a
// terminal: bytes so far (of the total when known), the rate, and the
// time left. It is drawn once progressEvery has passed, redrawn at most
// that often, and erased by done. A nil *progress draws nothing.
type progress struct {
	w     io.Writer
	clk   clock.Clock
	what  string
	total int64 // < 0: unknown

	mu    sync.Mutex
	start time.Time
	last  time.Time
	n     int64
	shown bool
	ended bool
}

// newProgress returns the progress of moving total bytes (< 0: unknown),
// or nil when stderr is not a terminal.
func newProgress(what string, total int64) *progress {
	if !stderrIsTerminal() {
		return nil
	}
	now := uiClock.Now()
	return &progress{w: Stderr, clk: uiClock, what: what, total: total, start: now, last: now}
}

// add counts n more bytes moved. Safe from any goroutine.
func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(n)
	now := p.clk.Now()
	if p.ended || now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	p.shown = true
	io.WriteString(p.w, "\r"+p.lineLocked(now)+"\x1b[K")
}

func (p *progress) lineLocked(now time.Time) string {
	rate := float64(p.n) / now.Sub(p.start).Seconds()
	s := fmt.Sprintf("%s %s", p.what, bytesString(p.n))
	if p.total >= 0 {
		s += " / " + bytesString(p.total)
	}
	s += fmt.Sprintf("  %s/s", bytesString(int64(rate)))
	if p.total >= p.n && rate > 0 {
		left := time.Duration(float64(p.total-p.n) / rate * float64(time.Second))
		s += fmt.Sprintf("  %s left", left.Round(time.Second))
	}
	return s
}

// done erases the line; nothing is drawn after it.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown && !p.ended {
		io.WriteString(p.w, clearLine)
	}
	p.ended = true
}

// reader counts what r hands out.
func (p *progress) reader(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return &progressReader{r: r, p: p}
}

type progressReader struct {
	r io.Reader
	p *progress
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.p.add(n)
	return n, err
}

// bytesString is a byte count in binary units: 512 B, 1.5 KiB, 20.0 MiB.
func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
