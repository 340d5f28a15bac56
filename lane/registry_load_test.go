package lane

import (
	"sync"
	"testing"

	"github.com/sema-agent/sema/lane/store/sqlite"
)

// Under 500 concurrent handshakes the SQLite registry holds a small,
// fixed number of files open, and a full pool waits: every hello gets its
// helloAck (before, each concurrent operation opened a connection and the
// open files grew with the load until hellos were refused auth_failed).
func TestRegistryOpenFilesStayFixedUnder500ConcurrentHandshakes(t *testing.T) {
	const n = 500
	raiseNoFile(t, 4*n+1024)
	l := newWSLane(t, func(c *Config) { c.MaxPreAuth, c.MaxPreAuthPerAddr = n, n })
	fleet := l.fakeFleet(n)

	stop := make(chan struct{})
	peak := make(chan int)
	go func() { // samples the descriptors for as long as the handshakes run
		most := 0
		for {
			most = max(most, registryFilesOpen(t, l.dir))
			select {
			case <-stop:
				peak <- most
				return
			default:
			}
		}
	}()
	failed := helloAll(fleet, true)
	close(stop)
	most := <-peak

	for i, err := range failed {
		if i < 5 {
			t.Errorf("a handshake failed: %v", err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d handshakes failed (at most %d files open on sema.db*)", len(failed), n, most)
	}
	if most > sqlite.MaxOpenFiles {
		t.Fatalf("%d files open on sema.db* during %d concurrent handshakes, want at most %d", most, n, sqlite.MaxOpenFiles)
	}
	var wg sync.WaitGroup
	for _, fd := range fleet {
		wg.Go(func() { fd.ws.CloseNow() })
	}
	wg.Wait()
	t.Logf("at most %d files open on sema.db* (bound %d) during %d concurrent handshakes", most, sqlite.MaxOpenFiles, n)
}
