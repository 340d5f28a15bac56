package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// stalledBody sends a request whose body is announced as n bytes, sends 10
// of them and stops; it returns the connection and a reader of the answer.
func stalledBody(t *testing.T, base, path, key string, n int) (net.Conn, *bufio.Reader) {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"kind\":\"",
		path, u.Host, key, n)
	return c, bufio.NewReader(c)
}

// answerWithin reads the answer's status, failing if none comes in d.
func answerWithin(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration, what string) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer within %v: %v", what, d, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// No single key can make the lane refuse anyone else: a key with no device
// is refused before its body is read; a device's owner who stalls a body
// holds at most its share of the budget, is answered 503 at once past it,
// and loses what it held when the body stops arriving; a third key is
// served all along. timeoutMs is bounded.
func TestAStalledBodyCannotStarveOtherCallers(t *testing.T) {
	s := startServer(t, t.TempDir(), "--max-buffered-content", "8388608", "--body-idle-timeout", "1s")
	key := func(name string) *laneServer {
		k, errOut, code := s.sema(t, nil, "identity", "create", name)
		if code != 0 {
			t.Fatalf("identity create %s: %s", name, errOut)
		}
		return &laneServer{proc: s.proc, url: s.url, data: s.data, key: strings.TrimSpace(k)}
	}
	mallory, eve, bob := key("mallory"), key("eve"), key("bob")
	_, eveDev, _ := enrollAndServe(t, eve, t.TempDir())
	_, bobDev, _ := enrollAndServe(t, bob, t.TempDir())

	// A key with no device: 404 before a byte of the body is read.
	c, br := stalledBody(t, s.url, "/v1/devices/"+bobDev+"/instructions", mallory.key, 1<<20)
	if got := answerWithin(t, c, br, 5*time.Second, "mallory"); got != http.StatusNotFound {
		t.Fatalf("a key with no device: %d, want 404 at once", got)
	}
	// The owner's first stalled body holds its share (1 MiB + its decoded
	// most, under the 2 MiB share); a second is 503 at once, unread.
	first, firstR := stalledBody(t, s.url, "/v1/devices/"+eveDev+"/instructions", eve.key, 1<<20)
	waitFor(t, "eve's body to be held", func() bool { return s.metrics(t)["sema_lane_buffered_content_bytes"] > 0 })
	second, secondR := stalledBody(t, s.url, "/v1/devices/"+eveDev+"/instructions", eve.key, 1<<20)
	if got := answerWithin(t, second, secondR, 5*time.Second, "eve's second"); got != http.StatusServiceUnavailable {
		t.Fatalf("eve past her share: %d, want 503 at once", got)
	}
	// Bob is served meanwhile.
	if out, errOut, code := bob.sema(t, nil, "run", "--device", bobDev, "--", "echo served"); code != 0 || out != "served\n" {
		t.Fatalf("bob while eve stalls: exit %d %q %s", code, out, errOut)
	}
	// Eve's stalled body is dropped after the idle timeout, and freed.
	if got := answerWithin(t, first, firstR, 10*time.Second, "eve's first"); got != http.StatusRequestTimeout {
		t.Fatalf("a stalled body: %d, want 408", got)
	}
	waitFor(t, "the budget to be free again", func() bool { return s.metrics(t)["sema_lane_buffered_content_bytes"] == 0 })

	// timeoutMs past the lane's bound: 400 naming it.
	_, errOut, code := bob.sema(t, nil, "run", "--device", bobDev, "--timeout", "25h", "--", "true")
	if code == 0 || !strings.Contains(errOut, "--max-timeout") {
		t.Fatalf("a 25 h timeout: exit %d, %s", code, errOut)
	}
}

// /v1/mcp refuses a request from a web origin it was not told to allow,
// 403, before any of it is read or its key checked; an allowed origin and
// a client that sends none are served.
func TestMCPRefusesAHostileOrigin(t *testing.T) {
	s := startServer(t, t.TempDir(), "--mcp-allowed-origin", "http://localhost:6274")
	enrollAndServe(t, s, t.TempDir())
	post := func(origin, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 512)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	for _, key := range []string{s.key, ""} {
		if code, body := post("http://evil.example", key); code != http.StatusForbidden || !strings.Contains(body, "auth.origin_forbidden") || !strings.Contains(body, "--mcp-allowed-origin") {
			t.Errorf("a hostile origin (key %v): %d %s", key != "", code, body)
		}
	}
	for _, origin := range []string{"http://localhost:6274", ""} {
		if code, body := post(origin, s.key); code != http.StatusOK {
			t.Errorf("origin %q: %d %s", origin, code, body)
		}
	}
}

// A body one caller could never hold is 413 naming the per-caller bound and
// the streamed write, not a 503 that no retry would ever pass.
func TestABodyOverTheCallersShareIs413(t *testing.T) {
	s := startServer(t, t.TempDir(), "--max-buffered-content", strconv.Itoa(8<<20))
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	body := `{"kind":"writeFile","args":{"path":"/tmp/x"},"timeoutMs":1000,"contentB64":"` + strings.Repeat("A", 2<<20) + `"}`
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/devices/"+id+"/instructions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 1024)
	n, _ := resp.Body.Read(b)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b[:n]), "--max-buffered-content-per-identity") ||
		!strings.Contains(string(b[:n]), "streamed write") {
		t.Fatalf("%d %s", resp.StatusCode, b[:n])
	}
}

// A SQLite server killed with -9 and started again takes back the leases
// of the process before it: its devices are back within seconds, not
// refused already_connected until those leases expire (a minute).
func TestAKilledServerHasItsDevicesBackInSeconds(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	u, _ := url.Parse(s.url)
	s.cmd.Process.Kill()
	s.wait(t)
	killed := time.Now()
	again := startServer(t, data, "--listen", u.Host) // the same address: the device dials it
	deadline := time.Now().Add(20 * time.Second)
	for !again.online(t, id) {
		if time.Now().After(deadline) {
			t.Fatalf("the device is not back 20 s after the restart:\n%s", again.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the device was back %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	if !strings.Contains(again.stderr.String(), "took back the leases") {
		t.Errorf("the restart does not say it took back the dead process's leases:\n%s", again.stderr)
	}
}

// One identity holds at most --max-api-keys-per-identity keys; a revoked
// one makes room again.
func TestAPIKeysPerIdentityAreCapped(t *testing.T) {
	s := startServer(t, t.TempDir(), "--max-api-keys-per-identity", "2")
	k, _, _ := s.sema(t, nil, "identity", "create", "carol")
	carol := &laneServer{proc: s.proc, url: s.url, data: s.data, key: strings.TrimSpace(k)}
	_, errOut, code := carol.sema(t, nil, "apikey", "create")
	if code != 0 {
		t.Fatalf("the second key: exit %d %s", code, errOut)
	}
	_, errOut, code = carol.sema(t, nil, "apikey", "create")
	if code == 0 || !strings.Contains(errOut, "api_key.limit_reached") || !strings.Contains(errOut, "--max-api-keys-per-identity") {
		t.Fatalf("the third key: exit %d %s", code, errOut)
	}
}

// The enroll line `sema token` prints is all a machine needs: the token
// stands for the user's credential on that one call, so the user's API key
// never has to be on the device; as a credential it opens nothing else.
func TestEnrollmentNeedsOnlyThePrintedLine(t *testing.T) {
	s := startServer(t, t.TempDir())
	line, errOut, code := s.sema(t, nil, "token", "--workspace", t.TempDir())
	if code != 0 {
		t.Fatalf("token: %s", errOut)
	}
	args := strings.Fields(strings.TrimSpace(line))
	token := args[slices.Index(args, "--token")+1]
	// Another endpoint with the token as the credential: refused.
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/devices", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the token as a credential for GET /v1/devices: %d, want 403", resp.StatusCode)
	}
	// A token is the credential for enrolling with itself only.
	other, _, _ := s.sema(t, nil, "token", "--workspace", t.TempDir())
	otherArgs := strings.Fields(other)
	body := `{"token":"` + otherArgs[slices.Index(otherArgs, "--token")+1] + `","pubkey":"` + strings.Repeat("A", 43) + `=","platformOs":"linux","workspaceRoot":"/w"}`
	req, _ = http.NewRequest(http.MethodPost, s.url+"/v1/devices/enroll", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("one token as the credential for enrolling with another: %d, want 403", resp.StatusCode)
	}
	// The enroll line with no API key anywhere in its environment.
	stateDir := t.TempDir()
	p := startProc(t, []string{cli.EnvAPIKey + "=", cli.EnvServer + "="}, nil, append(args[1:], "--state-dir", stateDir)...)
	if code := p.wait(t); code != 0 {
		t.Fatalf("enroll with the printed line alone: exit %d %s", code, p.stderr)
	}
	id := strings.TrimSpace(p.stdout.String())
	startServe(t, stateDir)
	waitFor(t, "the device online", func() bool { return s.online(t, id) })
	if out, _, code := s.sema(t, nil, "run", "--device", id, "--", "echo enrolled"); code != 0 || out != "enrolled\n" {
		t.Fatalf("run on the device: exit %d %q", code, out)
	}
}

// SIGTERM drains as a deploy expects: a 2 s command in flight finishes
// with its own result, a new one is refused as the lane shutting down, and
// the server exits 0.
func TestADrainLetsShortWorkFinish(t *testing.T) {
	s := startServer(t, t.TempDir(), "--drain-grace", "10s")
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	run := startProc(t, s.env(t), nil, "run", "--device", id, "--", "echo started; sleep 2; echo finished")
	waitFor(t, "the command to start", func() bool { return strings.Contains(run.stdout.String(), "started") })
	s.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the lane to refuse new work", func() bool {
		_, errOut, code := s.sema(t, nil, "run", "--device", id, "--", "true")
		return code != 0 && strings.Contains(errOut, "shutting down")
	})
	if code := run.wait(t); code != 0 || !strings.Contains(run.stdout.String(), "finished") {
		t.Fatalf("the command in flight: exit %d, %q %s", code, run.stdout, run.stderr)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("sema server after SIGTERM: exit %d\n%s", code, s.stderr)
	}
}

// sema device status shows an instruction in flight as it runs, and drops
// it as it settles, not at the next heartbeat (15 s).
func TestDeviceStatusDropsSettledWorkAtOnce(t *testing.T) {
	s := startServer(t, t.TempDir())
	stateDir, id, _ := enrollAndServe(t, s, t.TempDir())
	run := startProc(t, s.env(t), nil, "run", "--device", id, "--", "echo started; sleep 2")
	inflight := func() int {
		out, _, _ := s.sema(t, nil, "device", "status", "--state-dir", stateDir, "--json")
		var st struct {
			Serve struct {
				Inflight []string `json:"inflight"`
			} `json:"serve"`
		}
		json.Unmarshal([]byte(out), &st)
		return len(st.Serve.Inflight)
	}
	waitFor(t, "the command to start", func() bool { return strings.Contains(run.stdout.String(), "started") })
	waitFor(t, "device status to show it in flight", func() bool { return inflight() == 1 })
	if code := run.wait(t); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	settled := time.Now()
	for inflight() != 0 {
		if time.Since(settled) > 5*time.Second {
			t.Fatal("device status still shows the settled command in flight 5 s later")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
