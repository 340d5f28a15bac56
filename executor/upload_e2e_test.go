package executor_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/livelane"
	"github.com/sema-agent/sema/lane"
)

// realLane is the real lane over real HTTP with one real executor
// enrolled and serving, in-process over loopback.
type realLane struct {
	t        *testing.T
	srv      *lane.Server
	url      string
	apiKey   string
	deviceID string
	ws       string // the executor's workspace root
	// runDone has Run's return; a test that takes it puts it back.
	runDone chan error
	live    *livelane.Lane
}

func startRealLane(t *testing.T) *realLane {
	t.Helper()
	l := livelane.Start(t, testLogger(t))
	d := l.AddDevice()
	return &realLane{t: t, srv: l.Srv, url: l.URL, apiKey: l.APIKey, deviceID: d.ID, ws: d.Workspace, runDone: d.Done, live: l}
}

func (l *realLane) waitFor(what string, cond func() bool) {
	l.t.Helper()
	l.live.WaitFor(what, cond)
}

// upload is the answer to a streamed write: the HTTP status and, for 200,
// the outcome line's state and outcome; err when the request failed.
type upload struct {
	status  int
	body    string
	state   string
	outcome map[string]any
	err     error
}

// put streams n bytes of body to POST /v1/devices/{id}/writes.
func (l *realLane) put(query url.Values, body io.Reader, n int64) upload {
	l.t.Helper()
	req, err := http.NewRequestWithContext(l.t.Context(), "POST", l.url+"/v1/devices/"+l.deviceID+"/writes?"+query.Encode(), body)
	if err != nil {
		l.t.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set("Authorization", "Bearer "+l.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return upload{err: err}
	}
	defer resp.Body.Close()
	u := upload{status: resp.StatusCode}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		u.body = string(b)
		return u
	}
	events := api.NewEventReader(resp.Body)
	for {
		e, err := events.Next()
		if err != nil {
			u.err = err
			return u
		}
		if e.Event == api.EventOutcome {
			u.state = string(e.State)
			json.Unmarshal(e.Outcome, &u.outcome)
			return u
		}
	}
}

func writeQuery(path string, sum [32]byte, extra ...string) url.Values {
	q := url.Values{"path": {path}, "timeoutMs": {"600000"}, "sha256": {hex.EncodeToString(sum[:])}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

// content is n pseudo-random bytes from seed, generated as they are read:
// the test holds none of it.
func content(seed uint64, n int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}), n)
}

func digestOf(t *testing.T, r io.Reader) [32]byte {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func fileDigest(t *testing.T, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return digestOf(t, f)
}

// onlyEntries fails unless dir holds exactly the names given: no staging
// file is left behind.
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

// A large streamed upload through the real HTTP endpoint to the real
// executor arrives byte-exact.
func TestStreamedUploadArrivesByteExact(t *testing.T) {
	l := startRealLane(t)
	l.bigUpload(uploadBytes, nil)
}

// bigUpload streams n bytes to a new file and checks it byte-exact;
// during calls sample while the upload runs.
func (l *realLane) bigUpload(n int64, during func()) time.Duration {
	t := l.t
	t.Helper()
	sum := digestOf(t, content(1, n))
	p := filepath.Join(l.ws, "big.bin")
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for during != nil {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				during()
			}
		}
	}()
	start := time.Now()
	u := l.put(writeQuery(p, sum), content(1, n), n)
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	if u.err != nil || u.state != "terminal" || u.outcome["ok"] != true || u.outcome["created"] != true {
		t.Fatalf("upload: %+v", u)
	}
	if fileDigest(t, p) != sum {
		t.Fatal("the file on disk differs from what was sent")
	}
	onlyEntries(t, l.ws, "big.bin")
	t.Logf("%d MiB in %v: %.0f MB/s", n>>20, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds()/1e6)
	os.Remove(p)
	return elapsed
}

// SEMA_SOAK=1: 1 GiB through the streamed endpoint, byte-exact, while the
// process (the lane, the executor and the client: all of it streams) stays
// within 64 MiB of its idle RSS.
func TestStreamedUploadSoak(t *testing.T) {
	if os.Getenv("SEMA_SOAK") == "" {
		t.Skip("SEMA_SOAK=1 runs a 1 GiB streamed upload and samples the RSS")
	}
	l := startRealLane(t)
	l.bigUpload(8<<20, nil) // warm: the buffers of one upload exist
	runtime.GC()
	idle := vmRSS(t)
	peak := idle
	l.bigUpload(1<<30, func() { peak = max(peak, vmRSS(t)) })
	t.Logf("RSS idle %d MiB, peak during 1 GiB %d MiB (+%d MiB)", idle>>20, peak>>20, (peak-idle)>>20)
	if peak-idle > 64<<20 {
		t.Fatalf("RSS grew by %d MiB during the upload, over 64 MiB", (peak-idle)>>20)
	}
}

// vmRSS is this process's resident set (VmRSS of /proc/self/status).
func vmRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// A client that lies about the digest, one whose body ends short, and an
// exclusive write over an existing file: each a failed instruction, no
// file (or the old one untouched), no staging file left.
func TestStreamedUploadFailures(t *testing.T) {
	l := startRealLane(t)
	const n = 3<<20 + 5
	sum := digestOf(t, content(2, n))

	lie := filepath.Join(l.ws, "lie.bin")
	u := l.put(writeQuery(lie, sha256.Sum256([]byte("something else"))), content(2, n), n)
	if u.err != nil || u.state != "terminal" || u.outcome["ok"] != false || u.outcome["errorCode"] != "invalid" ||
		!strings.Contains(fmt.Sprint(u.outcome["message"]), "sha256") {
		t.Fatalf("a lying digest: %+v", u)
	}
	onlyEntries(t, l.ws)

	// The client hangs up after a third of the body.
	short := filepath.Join(l.ws, "short.bin")
	u = l.put(writeQuery(short, sum), io.MultiReader(content(2, n/3), failingReader{}), n)
	if u.err == nil {
		t.Fatalf("a body that failed on the client's side: %+v", u)
	}
	l.waitFor("the short upload to settle", func() bool { return l.srv.Presence(l.deviceID).Inflight == 0 })
	onlyEntries(t, l.ws)

	// Declared longer than sent: the client closes its side early.
	u = l.put(writeQuery(short, sum, "kind", "appendFile"), content(2, n/2), n)
	if u.err == nil {
		t.Fatalf("a body shorter than its Content-Length: %+v", u)
	}
	l.waitFor("the short append to settle", func() bool { return l.srv.Presence(l.deviceID).Inflight == 0 })
	onlyEntries(t, l.ws)

	old := filepath.Join(l.ws, "old.txt")
	writeFileOS(t, old, "old content\n")
	u = l.put(writeQuery(old, sum, "kind", "writeFileExclusive"), content(2, n), n)
	if u.err != nil || u.outcome["errorCode"] != "already_exists" {
		t.Fatalf("writeFileExclusive over a file: %+v", u)
	}
	if readFile(t, old) != "old content\n" {
		t.Fatal("the existing file changed")
	}
	onlyEntries(t, l.ws, "old.txt")

	// And the same bytes honestly: the file is there, byte-exact.
	good := filepath.Join(l.ws, "good.bin")
	if u = l.put(writeQuery(good, sum, "kind", "writeFileExclusive"), content(2, n), n); u.outcome["ok"] != true {
		t.Fatalf("an honest exclusive write: %+v", u)
	}
	if fileDigest(t, good) != sum {
		t.Fatal("good.bin differs")
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("the client gave up") }
