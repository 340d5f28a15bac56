package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// stallPlan is the size of the stalling-reader test: a slice in the test
// command, the full run under SEMA_SOAK=1 (make soak).
func stallPlan() (size int64, rounds int, maxStall time.Duration) {
	if os.Getenv("SEMA_SOAK") != "" {
		return 1 << 30, 20, 20 * time.Second
	}
	return 48 << 20, 2, 300 * time.Millisecond
}

// §4 flow control through the real HTTP API and the real executor: a reader
// that stalls at random, for up to maxStall at a time, gets every byte of a
// large output and the command's own exit — never a cancel. The lane's
// window (backlog.go) is what makes it so; before it, a reader that fell
// behind at the wrong instant saw "cancelled (killed)".
func TestAStallingHTTPReaderGetsEveryByteAndNoCancel(t *testing.T) {
	size, rounds, maxStall := stallPlan()
	// The deployment's heartbeat and reconnect grace, not the harness's
	// short ones: this is about flow control, and a loaded machine that
	// misses 500 ms heartbeats tests drops instead (resumes are covered by
	// the drop suites).
	e := newEnv(t, func(c *lane.Config) {
		c.HeartbeatInterval, c.ReconnectGrace = protocol.DefaultHeartbeatInterval, protocol.DefaultReconnectGrace
	})
	// Past the proxy, which keeps every frame it forwards for its
	// retransmission checks: 20 GiB of chunks would not fit in memory.
	e.startExecutor(func(c *executor.Config) { c.Server = e.hs.URL })
	eventually(t, "the device is online", func() bool { return e.srv.Presence(e.deviceID).Online })
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 11))
		got, stalls, ev := readStalling(t, e, size, rng, maxStall)
		var o struct {
			OK       bool   `json:"ok"`
			Kind     string `json:"kind"`
			ExitCode *int   `json:"exitCode"`
		}
		json.Unmarshal(ev.Outcome, &o)
		if got != size || ev.CancelledBy != "" || !o.OK || o.Kind != "exec" || o.ExitCode == nil || *o.ExitCode != 0 {
			t.Fatalf("round %d: %d of %d bytes after %d stalls; outcome %s (cancelledBy %q)", round, got, size, stalls, ev.Outcome, ev.CancelledBy)
		}
		t.Logf("round %d: %d bytes, %d stalls", round, got, stalls)
	}
	if n := e.server().Metrics().DeliveryOverflows; n != 0 {
		t.Fatalf("DeliveryOverflows = %d", n)
	}
}

// readStalling posts `head -c size /dev/zero` and reads its NDJSON as a
// plain client would, stopping now and then for a random while; it returns
// the bytes of stdout, the stalls made and the last event.
func readStalling(t *testing.T, e *env, size int64, rng *rand.Rand, maxStall time.Duration) (int64, int, httpEvent) {
	t.Helper()
	resp, sc := e.postExecAt(t.Context(), e.hs.URL, "head -c "+strconv.FormatInt(size, 10)+" /dev/zero", 30*time.Minute)
	defer resp.Body.Close()
	var got int64
	var stalls int
	var last httpEvent
	for sc.Scan() {
		var ev httpEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		last = ev
		if ev.DataB64 != nil {
			data, err := base64.StdEncoding.DecodeString(*ev.DataB64)
			if err != nil || bytes.IndexFunc(data, func(r rune) bool { return r != 0 }) >= 0 {
				t.Fatalf("chunk %d: bad data (%v)", ev.StreamSeq, err)
			}
			got += int64(len(data))
		}
		if rng.Int64N(max(size>>16/4, 1)) == 0 { // about four stalls a round, at random chunks
			stalls++
			time.Sleep(time.Duration(rng.Int64N(int64(maxStall))))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got, stalls, last
}
