package lane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/ids"
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
	ctx := context.Background()
	idn, err := st.CreateIdentity(ctx, "fleet")
	if err != nil {
		tb.Fatal(err)
	}
	fleet := make([]fleetDevice, n)
	for i := range fleet {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		token := store.DigestOf(fmt.Sprintf("set_fleet_%d_%s", i, ids.ULID()))
		if _, err := st.CreateEnrollToken(ctx, idn.ID, token, time.Hour); err != nil {
			tb.Fatal(err)
		}
		d, _, err := st.RegisterDevice(ctx, store.Registration{TokenDigest: token, IdentityID: idn.ID,
			PublicKey: pub, PlatformOS: "linux", WorkspaceRoot: "/w"})
		if err != nil {
			tb.Fatal(err)
		}
		fleet[i] = fleetDevice{id: d.ID, priv: priv}
	}
	return fleet
}

// fakeFleet registers n devices and dials each (its challenge read), ready
// to say hello.
func (l *wsLane) fakeFleet(n int) []*fakeDevice {
	l.t.Helper()
	var out []*fakeDevice
	for _, d := range registerFleet(l.t, l.store, n) {
		fd := &fakeDevice{t: l.t, l: l, id: d.id, priv: d.priv, epoch: ids.ULID(), supports: defaultSupports}
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
