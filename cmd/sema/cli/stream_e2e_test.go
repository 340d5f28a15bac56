package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// seqLast makes `seq 1 seqLast` print 268,788,897 bytes: over 256 MiB of
// output that differs from line to line, which the test can compute too.
const seqLast = 31_100_000

// seqDigest is the length and SHA-256 of `seq 1 seqLast`.
func seqDigest() (int64, []byte) {
	h := sha256.New()
	var n int64
	buf := make([]byte, 0, 1<<20)
	for i := int64(1); i <= seqLast; i++ {
		buf = strconv.AppendInt(buf, i, 10)
		buf = append(buf, '\n')
		if len(buf) > 1<<20-32 {
			h.Write(buf)
			n += int64(len(buf))
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return n + int64(len(buf)), h.Sum(nil)
}

// countingHash counts and hashes what is written to it.
type countingHash struct {
	hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.Hash.Write(p)
}

// Over 256 MiB of output through the real server and executor, read by
// `sema run` and by a Go program on the HTTP API: every byte, in order.
func TestStreamOver256MiBIsByteExact(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 256 MiB twice")
	}
	// At the default delivery bound: the readers are faster than the
	// command here, but a spurious cancel would show as a short stream.
	s := startServer(t, t.TempDir())
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	wantLen, wantSum := seqDigest()
	command := fmt.Sprintf("seq 1 %d", seqLast)

	got := &countingHash{Hash: sha256.New()}
	var stderr bytes.Buffer
	run := exec.Command(semaBin, "run", "--device", id, "--timeout", "10m", "--", command)
	run.Env = append(os.Environ(), s.env(t)...)
	run.Stdout, run.Stderr = got, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("sema run: %v: %s", err, stderr.String())
	}
	if got.n != wantLen || !bytes.Equal(got.Sum(nil), wantSum) {
		t.Errorf("sema run wrote %d bytes (sha256 %x), want %d (%x)", got.n, got.Sum(nil), wantLen, wantSum)
	}

	body := fmt.Sprintf(`{"kind":"execStream","args":{"command":%q},"timeoutMs":600000}`, command)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+"/v1/devices/"+id+"/instructions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %v %v", resp, err)
	}
	defer resp.Body.Close()
	got = &countingHash{Hash: sha256.New()}
	events := api.NewEventReader(resp.Body)
	seq := int64(0)
	for {
		e, err := events.Next()
		if err == io.EOF {
			t.Fatal("the stream ended before the outcome")
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Event == api.EventAccepted {
			continue
		}
		if e.Event == api.EventOutcome {
			var o struct{ ExitCode *int }
			if json.Unmarshal(e.Outcome, &o); e.State != protocol.StateTerminal || o.ExitCode == nil || *o.ExitCode != 0 {
				t.Fatalf("outcome %s %s", e.State, e.Outcome)
			}
			break
		}
		if e.StreamSeq != seq {
			t.Fatalf("streamSeq %d, want %d", e.StreamSeq, seq)
		}
		seq++
		if e.Kind == protocol.ChunkStdout {
			got.Write(e.Data)
		}
	}
	if got.n != wantLen || !bytes.Equal(got.Sum(nil), wantSum) {
		t.Errorf("the HTTP API streamed %d bytes (sha256 %x), want %d (%x)", got.n, got.Sum(nil), wantLen, wantSum)
	}
}
