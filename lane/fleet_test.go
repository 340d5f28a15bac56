package lane

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Many devices at once, for the load tests and benchmarks: registered
// straight in the store (no HTTP plane, no enrollment rate limit), then
// driven by fakeDevice over real sockets.

// fleetDevice is a device registered in the store with its private key.
type fleetDevice struct {
	id   string
	priv ed25519.PrivateKey
}

// registerFleet registers n devices of one new identity.
func registerFleet(tb testing.TB, st store.Store, n int) []fleetDevice {
	tb.Helper()
	idn, err := st.CreateIdentity(context.Background(), "fleet")
	if err != nil {
		tb.Fatal(err)
	}
	return registerDevices(tb, st, idn.ID, n)
}

// registerDevices registers n devices of an identity, oldest first.
func registerDevices(tb testing.TB, st store.Store, ownerID string, n int) []fleetDevice {
	tb.Helper()
	regs, err := lanetest.RegisterDevices(context.Background(), st, ownerID, n)
	if err != nil {
		tb.Fatal(err)
	}
	fleet := make([]fleetDevice, n)
	for i, r := range regs {
		fleet[i] = fleetDevice{id: r.ID, priv: r.Priv}
	}
	return fleet
}

// fake is the executor of a registered device, not yet dialled.
func (l *wsLane) fake(d fleetDevice) *fakeDevice {
	return &fakeDevice{t: l.t, l: l, id: d.id, priv: d.priv, epoch: ids.ULID(), supports: defaultSupports}
}

// fakeFleet registers n devices and dials each (its challenge read), ready
// to say hello.
func (l *wsLane) fakeFleet(n int) []*fakeDevice {
	l.t.Helper()
	var out []*fakeDevice
	for _, d := range registerFleet(l.t, l.store, n) {
		fd := l.fake(d)
		fd.dial()
		out = append(out, fd)
	}
	return out
}

// helloAll sends every device's hello at the same moment and reads each
// answer; with ackGen the devices also send generationAck. It returns one
// error per device that did not get helloAck. Safe off the test goroutine:
// nothing here calls t.Fatal.
func helloAll(fleet []*fakeDevice, ackGen bool) []error {
	hellos := make([][]byte, len(fleet))
	for i, fd := range fleet {
		b, err := fd.helloFrame().MarshalJSON()
		if err != nil {
			return []error{err}
		}
		hellos[i] = b
	}
	start := make(chan struct{})
	errs := make([]error, len(fleet))
	var wg sync.WaitGroup
	for i, fd := range fleet {
		wg.Go(func() {
			<-start
			errs[i] = fd.helloOnce(hellos[i], ackGen)
		})
	}
	close(start)
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}

func (fd *fakeDevice) helloOnce(hello []byte, ackGen bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if err := fd.ws.Write(ctx, websocket.MessageText, hello); err != nil {
		return fmt.Errorf("%s: hello: %w", fd.id, err)
	}
	_, b, err := fd.ws.Read(ctx)
	if err != nil {
		return fmt.Errorf("%s: reading the answer to hello: %w", fd.id, err)
	}
	f, err := protocol.DecodeServerFrame(protocol.TextMessage, b)
	if err != nil {
		return fmt.Errorf("%s: %w", fd.id, err)
	}
	ack, ok := f.(*protocol.HelloAck)
	if !ok {
		return fmt.Errorf("%s: hello answered %s, want helloAck", fd.id, describe(f))
	}
	fd.gen, fd.ack = ack.Gen, ack
	if !ackGen {
		return nil
	}
	b, _ = (&protocol.GenerationAck{Gen: ack.Gen}).MarshalJSON()
	return fd.ws.Write(ctx, websocket.MessageText, b)
}

// registryFilesOpen counts this process's descriptors open on the SQLite
// registry in dir: sema.db and its -wal and -shm files.
func registryFilesOpen(tb testing.TB, dir string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("no /proc/self/fd: %v", err)
	}
	db := filepath.Join(dir, "sema.db")
	n := 0
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && strings.HasPrefix(target, db) {
			n++
		}
	}
	return n
}

// writeFleetKeys writes the fleet's ids and key seeds for its child
// process, one "id seed-hex" a line.
func writeFleetKeys(tb testing.TB, fleet []fleetDevice) string {
	tb.Helper()
	var keys strings.Builder
	for _, d := range fleet {
		fmt.Fprintf(&keys, "%s %s\n", d.id, hex.EncodeToString(d.priv.Seed()))
	}
	keyFile := filepath.Join(tb.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(keys.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return keyFile
}

// startFleetProcess connects every device of keyFile to the lane from a
// child process (this test binary as TestHelperIdleFleet), so that the
// devices' sockets and memory are not this process's. It returns once all
// are connected; stop disconnects them and waits for the child.
func startFleetProcess(tb testing.TB, l *wsLane, keyFile string) (stop func()) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIdleFleet$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LANE_FLEET_URL="+l.wsURL(), "LANE_FLEET_KEYS="+keyFile)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	stop = func() {
		stdin.Close() // the fleet disconnects and exits
		cmd.Wait()
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ready ") {
			return stop
		}
	}
	stop()
	tb.Fatal("the fleet did not come up")
	return nil
}

// activeCount is how many devices have an active connection.
func (l *wsLane) activeCount() int {
	l.srv.mu.Lock()
	devices := make([]*deviceState, 0, len(l.srv.devices))
	for _, d := range l.srv.devices {
		devices = append(devices, d)
	}
	l.srv.mu.Unlock()
	n := 0
	for _, d := range devices {
		d.mu.Lock()
		if d.conn != nil && d.conn.state() == connActive {
			n++
		}
		d.mu.Unlock()
	}
	return n
}
