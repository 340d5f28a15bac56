package lane

import (
	"sync"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

// periodic runs a round every interval of the lane's clock, from one
// goroutine it owns, until close. Rounds never overlap: the next wait
// begins when a round ends.
type periodic struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startPeriodic starts the rounds; with atStart the first runs at once.
func startPeriodic(clk clock.Clock, every time.Duration, atStart bool, round func()) *periodic {
	p := &periodic{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if atStart {
			round()
		}
		for {
			t := clk.NewTimer(every)
			select {
			case <-p.stop:
				t.Stop()
				return
			case <-t.C():
			}
			round()
		}
	}()
	return p
}

// close stops the rounds and waits for one under way to end.
func (p *periodic) close() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}
