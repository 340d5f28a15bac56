package lane

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/protocol"
)

// answerAtOnce makes an established fake device answer every exec at once:
// one exit chunk and the result, from one goroutine reading the socket.
func answerAtOnce(fd *fakeDevice) (stop func()) {
	ws, gen := fd.ws, fd.gen
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		var buf []byte
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			f, err := protocol.DecodeServerFrame(protocol.TextMessage, b)
			in, ok := f.(*protocol.Instruction)
			if err != nil || !ok {
				continue
			}
			ch := protocol.Chunk{Gen: gen, InstructionID: in.InstructionID, StreamSeq: 0, Kind: protocol.ChunkExit}
			buf, _ = ch.AppendJSON(buf[:0])
			if ws.Write(ctx, websocket.MessageText, buf) != nil {
				return
			}
			res, _ := (&protocol.Result{Gen: gen, InstructionID: in.InstructionID, Outcome: protocol.ExecOutcome{}}).MarshalJSON()
			if ws.Write(ctx, websocket.MessageText, res) != nil {
				return
			}
		}
	}()
	return func() { ws.CloseNow(); <-done }
}

// BenchmarkRoundTrip is Dispatch of a trivial exec to an in-process fake
// device over a real loopback WebSocket, answered at once (an exit chunk
// and the result), until the Call settles. Real clock, SQLite registry,
// the spec's defaults (maxInflight 4).
func BenchmarkRoundTrip(b *testing.B) {
	l := newWSLane(b, func(c *Config) { c.Clock = clock.Real{} })
	fd := l.enroll(protocol.KindExec)
	fd.establish()
	defer answerAtOnce(fd)()
	in := execInstr("true")
	roundTrip := func() {
		call, err := l.srv.Dispatch(context.Background(), fd.id, in)
		if err != nil {
			b.Error(err)
			return
		}
		s, err := call.Wait(context.Background())
		if err != nil || s.State != protocol.StateTerminal || !s.Outcome.OK() {
			b.Errorf("settlement %+v, %v", s, err)
		}
	}
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			roundTrip()
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				roundTrip()
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
	})
	// More callers than maxInflight: the queue and the slot refill work too.
	b.Run("parallel-queued", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				roundTrip()
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
	})
}

// raiseNoFile lifts RLIMIT_NOFILE to at least n (root may raise the hard
// limit too).
func raiseNoFile(tb testing.TB, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = n
	if lim.Max < n {
		lim.Max = n
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatalf("cannot raise RLIMIT_NOFILE to %d: %v", n, err)
	}
}

func heapAndStack() (uint64, int) {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse, runtime.NumGoroutine()
}

// BenchmarkIdleDeviceMemory measures what the lane holds per connected,
// idle device: N devices connect (hello, helloAck, generationAck) from a
// child process (this test binary as TestHelperIdleFleet), so the
// HeapInuse+StackInuse delta of this process is the lane's alone. The
// lane runs on a fake clock: idle means no timer fires. Run with
// -benchtime=1x; the fleet is set up once whatever b.N is.
func BenchmarkIdleDeviceMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) { benchmarkIdle(b, n) })
	}
}

func benchmarkIdle(b *testing.B, n int) {
	raiseNoFile(b, uint64(n)+4096)
	l := newWSLane(b, func(c *Config) { c.MaxPreAuthPerAddr = 64 })
	keyFile := writeFleetKeys(b, registerFleet(b, l.store, n))
	before, goroutinesBefore := heapAndStack()
	start := time.Now()
	stop := startFleetProcess(b, l, keyFile)
	defer stop()
	connectTime := time.Since(start)
	eventually(b, "every device is active", func() bool { return l.activeCount() == n })
	after, goroutinesAfter := heapAndStack()
	b.ReportMetric(float64(after-before)/float64(n), "B/device")
	b.ReportMetric(float64(goroutinesAfter-goroutinesBefore)/float64(n), "goroutines/device")
	b.ReportMetric(connectTime.Seconds(), "s-to-connect-all")
}

// TestHelperIdleFleet is the device fleet of BenchmarkIdleDeviceMemory, run
// in a child process: it connects every device of LANE_FLEET_KEYS, prints
// "ready N", and holds the sockets idle until stdin closes.
func TestHelperIdleFleet(t *testing.T) {
	url, keyFile := os.Getenv("LANE_FLEET_URL"), os.Getenv("LANE_FLEET_KEYS")
	if url == "" {
		t.Skip("the child process of BenchmarkIdleDeviceMemory")
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	raiseNoFile(t, uint64(len(lines))+4096)
	var (
		mu    sync.Mutex
		conns []*websocket.Conn
		next  atomic.Int64
		wg    sync.WaitGroup
		fail  atomic.Value
	)
	connect := func(line string) error {
		id, seedHex, _ := strings.Cut(line, " ")
		seed, _ := hex.DecodeString(seedHex)
		priv := ed25519.NewKeyFromSeed(seed)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var ws *websocket.Conn
		for attempt := 0; ; attempt++ { // 503 at the pre-auth cap: back off and retry
			ws, _, err = websocket.Dial(ctx, url, nil)
			if err == nil {
				break
			}
			if attempt > 100 {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		read := func() protocol.ServerFrame {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return nil
			}
			f, _ := protocol.DecodeServerFrame(protocol.TextMessage, b)
			return f
		}
		ch, ok := read().(*protocol.Challenge)
		if !ok {
			return fmt.Errorf("%s: no challenge", id)
		}
		epoch := ids.ULID()
		p, _ := protocol.HelloSignaturePayload(ch.Nonce, id, epoch, protocol.ProtocolVersion)
		h := &protocol.Hello{ProtocolVersion: protocol.ProtocolVersion, DeviceID: id, Epoch: epoch,
			SignatureB64: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, p)),
			Platform:     protocol.Platform{OS: "linux", Arch: "amd64", ExecutorVersion: "fleet"}, WorkspaceRoot: "/w",
			PathFlavor: "posix", Supports: []protocol.InstructionKind{protocol.KindExec}}
		b, _ := h.MarshalJSON()
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			return err
		}
		ack, ok := read().(*protocol.HelloAck)
		if !ok {
			return fmt.Errorf("%s: no helloAck", id)
		}
		b, _ = (&protocol.GenerationAck{Gen: ack.Gen}).MarshalJSON()
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			return err
		}
		ws.CloseRead(context.Background()) // answers control frames; nothing else will come
		mu.Lock()
		conns = append(conns, ws)
		mu.Unlock()
		return nil
	}
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(lines) {
					return
				}
				if err := connect(lines[i]); err != nil {
					fail.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := fail.Load(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready " + strconv.Itoa(len(conns)))
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	for _, ws := range conns {
		ws.CloseNow()
	}
}
