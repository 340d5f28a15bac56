package cli_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// The HTTP resource limits of `sema server`, through the real binary and a
// real `sema device serve`.

// Eight concurrent 100 MiB writes (POST /v1/devices/{id}/instructions,
// writeFile with contentB64) never take the lane above 1 GiB of RSS; the
// ones the buffered-content budget refuses get 503 service.busy with
// Retry-After, and every accepted one lands whole. Half the clients send
// "Expect: 100-continue" (a refusal then comes before the body), half do
// not (the lane reads and drops the refused body so that the answer is
// not lost to a reset). SEMA_TEST_WRITES=N runs N writes instead of 8.
func TestConcurrentLargeWritesStayUnderAGiB(t *testing.T) {
	writes := 8
	if v := os.Getenv("SEMA_TEST_WRITES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SEMA_TEST_WRITES=%q: want a positive count", v)
		}
		writes = n
	}
	const size = 100 << 20
	// One identity sends them all: its share is the whole budget here, so
	// that what is measured is the lane's bound, not the per-caller one.
	s := startServer(t, t.TempDir(), "--max-buffered-content-per-identity", strconv.Itoa(256<<20))
	ws := t.TempDir()
	_, id, _ := enrollAndServe(t, s, ws)
	results := make([]writeResult, writes)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() {
			<-start
			results[i] = postLargeWrite(s, id, filepath.Join(ws, fmt.Sprintf("w%d.bin", i)), uint64(i), size)
		})
	}
	close(start)
	wg.Wait()
	pid := s.cmd.Process.Pid
	peak, after := procStatusKiB(t, pid, "VmHWM"), procStatusKiB(t, pid, "VmRSS")
	t.Logf("%d concurrent %d MiB writes: the lane's peak RSS %d MiB, %d MiB as they end", writes, size>>20, peak>>10, after>>10)
	if peak > 1<<20 {
		t.Errorf("the lane's peak RSS is %d MiB, over 1 GiB", peak>>10)
	}
	// And the lane gives the memory back once it is idle again.
	waitFor(t, "the lane's RSS to fall under 128 MiB", func() bool { after = procStatusKiB(t, pid, "VmRSS"); return after < 128<<10 })
	t.Logf("idle again: %d MiB", after>>10)
	accepted := 0
	for i, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("write %d: %v", i, r.err)
		case r.status == http.StatusServiceUnavailable:
			if r.code != "service.busy" || r.retryAfter == "" {
				t.Errorf("write %d: 503 %s, Retry-After %q", i, r.code, r.retryAfter)
			}
		case r.status == http.StatusOK:
			accepted++
			if r.state != "terminal" || !r.ok {
				t.Errorf("write %d: settled %s, ok %v", i, r.state, r.ok)
				continue
			}
			if got, want := fileDigest(t, filepath.Join(ws, fmt.Sprintf("w%d.bin", i))), contentDigest(uint64(i), size); got != want {
				t.Errorf("write %d: the file on disk is not the content sent", i)
			}
		default:
			t.Errorf("write %d: status %d %s", i, r.status, r.code)
		}
	}
	if accepted == 0 {
		t.Fatal("no write was accepted")
	}
	t.Logf("%d accepted, %d refused 503", accepted, writes-accepted)
	if m := s.metrics(t); m["sema_lane_content_busy_total"] != float64(writes-accepted) || m["sema_lane_buffered_content_bytes"] != 0 {
		t.Errorf("metrics: busy %v, buffered %v", m["sema_lane_content_busy_total"], m["sema_lane_buffered_content_bytes"])
	}
}

type writeResult struct {
	status           int
	code, retryAfter string
	state            string
	ok               bool
	err              error
}

// content is write i's bytes: a seeded stream, so that nothing holds it.
func content(i uint64) io.Reader {
	var seed [32]byte
	seed[0] = byte(i)
	return rand.NewChaCha8(seed)
}

func contentDigest(i uint64, size int64) [32]byte {
	h := sha256.New()
	io.CopyN(h, content(i), size)
	return [32]byte(h.Sum(nil))
}

func fileDigest(t *testing.T, path string) [32]byte {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return [32]byte(h.Sum(nil))
}

// postLargeWrite streams a writeFile body with Content-Length, encoding the
// content as it goes, and reads the answer to its end.
func postLargeWrite(s *laneServer, deviceID, path string, i uint64, size int64) writeResult {
	prefix := fmt.Sprintf(`{"kind":"writeFile","args":{"path":%q},"timeoutMs":600000,"contentB64":"`, path)
	suffix := `"}`
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, prefix)
		enc := base64.NewEncoder(base64.StdEncoding, pw)
		io.CopyN(enc, content(i), size)
		enc.Close()
		io.WriteString(pw, suffix)
		pw.Close()
	}()
	defer pr.Close()
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/devices/"+deviceID+"/instructions", pr)
	if err != nil {
		return writeResult{err: err}
	}
	req.ContentLength = int64(len(prefix)+len(suffix)) + int64(base64.StdEncoding.EncodedLen(int(size)))
	req.Header.Set("Authorization", "Bearer "+s.key)
	tr := &http.Transport{DisableKeepAlives: true}
	if i%2 == 1 {
		req.Header.Set("Expect", "100-continue")
		tr.ExpectContinueTimeout = time.Minute
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return writeResult{err: err}
	}
	defer resp.Body.Close()
	r := writeResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != http.StatusOK {
		var e struct{ ErrorCode string }
		json.NewDecoder(resp.Body).Decode(&e)
		r.code = e.ErrorCode
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var line struct {
			Event, State string
			Outcome      struct{ OK bool }
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			r.err = fmt.Errorf("an NDJSON line %q: %v", sc.Text(), err)
			return r
		}
		if line.Event == "outcome" {
			r.state, r.ok = line.State, line.Outcome.OK
			return r
		}
	}
	r.err = fmt.Errorf("the answer ended without an outcome: %v", sc.Err())
	return r
}

// procStatusKiB reads a "Vm…: N kB" line of /proc/PID/status.
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// --max-http-conns closes a connection over the cap at once and counts it
// in /metrics; --http-idle-timeout closes an idle keep-alive;
// --max-requests-per-identity bounds one identity's requests at once.
func TestServerHTTPConnectionFlags(t *testing.T) {
	s := startServer(t, t.TempDir(), "--max-http-conns", "2", "--http-idle-timeout", "200ms", "--max-requests-per-identity", "1")
	addr := strings.TrimPrefix(s.url, "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn, br *bufio.Reader, what string) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: not closed by the server (%v)", what, err)
		}
	}
	// A request whose body never finishes stays in its handler: a busy
	// connection, never closed for a newcomer. Its 100 Continue says the
	// handler has begun to read it.
	stalled := func(key string) net.Conn {
		c := dial()
		br := bufio.NewReader(c)
		io.WriteString(c, "POST /v1/sessions/s/rebind HTTP/1.1\r\nHost: lane\r\nAuthorization: Bearer "+key+"\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("a stalled request: %v %v", err, resp)
		}
		io.WriteString(c, "{")
		return c
	}
	other := createIdentityKey(t, s, "other")
	a := stalled(s.key)
	// The connection of the request just made may still hold its slot for
	// a moment after its answer (closable for a newcomer only after 5 s),
	// and a connection over the cap is closed unanswered: dial until one
	// is answered.
	var over net.Conn
	var br *bufio.Reader
	var resp *http.Response
	waitFor(t, "a connection within the cap to be answered", func() bool {
		over = dial()
		br = bufio.NewReader(over)
		io.WriteString(over, "GET /v1/whoami HTTP/1.1\r\nHost: lane\r\nAuthorization: Bearer "+s.key+"\r\n\r\n")
		var err error
		resp, err = http.ReadResponse(br, nil)
		return err == nil
	})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the admin's request over --max-requests-per-identity 1: %v", resp.Status)
	}
	io.Copy(io.Discard, resp.Body)
	closedByServer(over, br, "the connection of the request over --max-requests-per-identity")
	b := stalled(other)
	extra := dial()
	closedByServer(extra, bufio.NewReader(extra), "the connection over --max-http-conns")
	a.Close()
	b.Close()
	// Until the server has seen a and b close, a scrape may be refused too.
	refused := func() float64 {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get(s.url + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return parseExposition(t, string(body))["sema_lane_http_connections_refused_total"]
	}
	waitFor(t, "/metrics to count the refused connection", func() bool { return refused() >= 1 })

	// A keep-alive that goes idle is closed after --http-idle-timeout.
	c := dial()
	br = bufio.NewReader(c)
	io.WriteString(c, "GET /v1/capabilities HTTP/1.1\r\nHost: lane\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET: %v %v", err, resp)
	}
	io.Copy(io.Discard, resp.Body)
	closedByServer(c, br, "the idle keep-alive")
}

func TestServerHTTPLimitFlagsRefuseNonsense(t *testing.T) {
	var out bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &out
	t.Cleanup(func() { cli.Stdout, cli.Stderr = os.Stdout, os.Stderr })
	for _, flags := range [][]string{
		{"--max-http-conns", "0"},
		{"--http-idle-timeout", "0s"},
		{"--max-buffered-content", "1000"},
	} {
		out.Reset()
		args := append([]string{"server", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, flags...)
		if code := cli.Run(t.Context(), args); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d: %s", flags, code, cli.ExitUsage, out.String())
		}
		if !strings.Contains(out.String(), flags[0]+" "+flags[1]) {
			t.Errorf("%v: the error does not name the flag: %s", flags, out.String())
		}
	}
}

// createIdentityKey makes an identity through the admin's API and returns
// its key.
func createIdentityKey(t *testing.T, s *laneServer, name string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/v1/identities", strings.NewReader(`{"name":"`+name+`"}`))
	req.Header.Set("Authorization", "Bearer "+s.key)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ APIKey string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.APIKey == "" {
		t.Fatalf("creating identity %s: %d %v", name, resp.StatusCode, err)
	}
	return out.APIKey
}
