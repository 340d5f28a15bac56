package lane

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// releaseCounter counts the lease releases the lane asks of the store.
type releaseCounter struct {
	store.Store
	one, bulk atomic.Int64
}

func (c *releaseCounter) ReleaseLease(ctx context.Context, deviceID, holder string) error {
	c.one.Add(1)
	return c.Store.ReleaseLease(ctx, deviceID, holder)
}

func (c *releaseCounter) ReleaseReplicaLeases(ctx context.Context, replica string) (int64, error) {
	c.bulk.Add(1)
	return c.Store.ReleaseReplicaLeases(ctx, replica)
}

func countReleases(c *releaseCounter) func(*Config) {
	return func(cfg *Config) { c.Store, cfg.Store = cfg.Store, c }
}

func preAuthFor(n int) func(*Config) {
	return func(c *Config) { c.MaxPreAuth, c.MaxPreAuthPerAddr = n, n }
}

// restarted is the next process of this replica: a new Server on the same
// registry and clock.
func (l *wsLane) restarted(mutate ...func(*Config)) *wsLane {
	l.t.Helper()
	cfg := Config{Store: l.store, Clock: l.clk, Logger: quietLogger(), DrainGrace: -1}
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { srv.Shutdown(context.Background()) })
	hs := httptest.NewServer(NewDoors(srv))
	l.t.Cleanup(hs.Close)
	next := *l.testLane
	next.url, next.srv = hs.URL, srv
	return &wsLane{testLane: &next, clk: l.clk, owner: l.owner, ownerKey: l.ownerKey}
}

func (l *wsLane) activeDevices(fleet []*fakeDevice) int {
	n := 0
	for _, fd := range fleet {
		if l.connState(fd.id) == connActive {
			n++
		}
	}
	return n
}

// Shutdown releases every lease this replica holds in one statement,
// not one per connection, so the next start of the replica takes every
// device back at once instead of refusing it already_connected until the
// lease expires (before, 9,331 of 10,000 releases ran out of time).
func TestShutdownReleasesEveryLeaseInOneStatement(t *testing.T) {
	const n = 200
	raiseNoFile(t, 4*n+1024)
	counter := &releaseCounter{}
	l := newWSLane(t, preAuthFor(n), countReleases(counter))
	fleet := l.fakeFleet(n)
	if failed := helloAll(fleet, true); len(failed) > 0 {
		t.Fatalf("%d handshakes failed, the first: %v", len(failed), failed[0])
	}
	eventually(t, "every device is active", func() bool { return l.activeDevices(fleet) == n })
	before := counter.one.Load()

	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if one, bulk := counter.one.Load()-before, counter.bulk.Load(); one != 0 || bulk != 1 {
		t.Fatalf("Shutdown released %d leases one by one and called the bulk release %d times; want 0 and 1", one, bulk)
	}

	next := l.restarted(preAuthFor(n))
	for _, fd := range fleet {
		fd.l = next
		fd.dial()
	}
	if failed := helloAll(fleet, false); len(failed) > 0 {
		t.Fatalf("the restarted replica refused %d of %d devices, the first: %v", len(failed), n, failed[0])
	}
}

// fleetEnv sizes TestShutdownReleasesTheLeasesOfAFullFleet (make
// shutdown-fleet sets it to 10000).
const fleetEnv = "LANE_SHUTDOWN_FLEET"

// The same at full size: 10,000 devices connected from a child process (10,000
// sockets at each end do not fit one process's 20,000 files), SIGTERM's
// Shutdown, then every device's lease is free for the next process.
func TestShutdownReleasesTheLeasesOfAFullFleet(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(fleetEnv))
	if n <= 0 {
		t.Skipf("set %s=10000 (make shutdown-fleet) for the full fleet; TestShutdownReleasesEveryLeaseInOneStatement runs 200 devices", fleetEnv)
	}
	raiseNoFile(t, uint64(n)+4096)
	counter := &releaseCounter{}
	l := newWSLane(t, func(c *Config) { c.MaxPreAuthPerAddr = 64 }, countReleases(counter))
	fleet := registerFleet(t, l.store, n)
	stop := startFleetProcess(t, l, writeFleetKeys(t, fleet))
	defer stop()
	eventually(t, "every device is active", func() bool { return l.activeCount() == n })
	before := counter.one.Load()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // sema server's --shutdown-timeout
	defer cancel()
	start := time.Now()
	err := l.srv.Shutdown(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	one, bulk := counter.one.Load()-before, counter.bulk.Load()
	held := 0
	for _, d := range fleet {
		_, err := l.store.AcquireLease(context.Background(), store.LeaseRequest{DeviceID: d.id, Holder: "next", Epoch: "E", Replica: "rep_next", TTL: time.Minute})
		switch {
		case errors.Is(err, store.ErrLeaseHeld):
			held++
		case err != nil:
			t.Fatal(err)
		}
	}
	t.Logf("%d devices: Shutdown took %v, %d single and %d bulk releases; %d leases still held", n, took, one, bulk, held)
	if one != 0 || bulk != 1 || held != 0 {
		t.Fatalf("%d leases still held after Shutdown (%d single releases, %d bulk); want 0 held, 0 single, 1 bulk", held, one, bulk)
	}
	// On the way: the burst of connects and the burst of disconnects
	// lost no audit row (Shutdown wrote what was queued).
	for _, event := range []string{"device.connected", "device.disconnected"} {
		rows, err := l.store.AuditEvents(context.Background(), store.AuditFilter{Event: event, Limit: 2 * n})
		if err != nil || len(rows) != n {
			t.Errorf("%d %s rows (%v), want %d", len(rows), event, err, n)
		}
	}
	if dropped := l.srv.Metrics().AuditRowsDropped; dropped != 0 {
		t.Errorf("%d audit rows dropped", dropped)
	}
}
