package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// These tests drive the built `sema` binary as a user would: `sema server`
// on a loopback port with its own data dir, `sema token`, the enroll line
// it prints, `sema device serve`, `sema run`, `sema fs`, `sema devices`,
// revocation, SIGTERM.

// waitFor polls cond every few milliseconds until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// laneServer is a running `sema server`.
type laneServer struct {
	*proc
	url, data, key string
}

var listeningURL = regexp.MustCompile(`msg="lane listening" url=(\S+)`)

func startServer(t *testing.T, data string, flags ...string) *laneServer {
	t.Helper()
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--data", data}, flags...)
	s := &laneServer{proc: startProc(t, nil, nil, args...), data: data}
	waitFor(t, "the server to listen", func() bool {
		select {
		case <-s.done:
			t.Fatalf("sema server exited: %v\n%s", s.err, s.stderr)
		default:
		}
		m := listeningURL.FindStringSubmatch(s.stderr.String())
		if m != nil {
			s.url = m[1]
		}
		return m != nil
	})
	b, err := os.ReadFile(filepath.Join(data, cli.AdminKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s.key = strings.TrimSpace(string(b))
	return s
}

// env is what the user commands need.
func (s *laneServer) env(t *testing.T) []string {
	return []string{cli.EnvServer + "=" + s.url, cli.EnvAPIKey + "=" + s.key, "TMPDIR=" + t.TempDir()}
}

// sema runs one user command to its end.
func (s *laneServer) sema(t *testing.T, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startProc(t, s.env(t), stdin, args...)
	code = p.wait(t)
	return p.stdout.String(), p.stderr.String(), code
}

func (s *laneServer) devices(t *testing.T) []map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+"/v1/devices", nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Devices []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Devices
}

func (s *laneServer) online(t *testing.T, id string) bool {
	for _, d := range s.devices(t) {
		if d["deviceId"] == id {
			return d["online"] == true
		}
	}
	return false
}

func (s *laneServer) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("metrics content type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	return parseExposition(t, string(b))
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (\S+)$`)
	typeLine   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$`)
	helpLine   = regexp.MustCompile(`^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$`)
)

// parseExposition checks the Prometheus text format (every sample of a
// declared family, HELP and TYPE once each, numeric values, a final
// newline) and returns the samples by their full name with labels.
func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	if !strings.HasSuffix(text, "\n") {
		t.Errorf("the exposition does not end with a newline")
	}
	typed, helped := map[string]bool{}, map[string]bool{}
	out := map[string]float64{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case typeLine.MatchString(line):
			name := typeLine.FindStringSubmatch(line)[1]
			if typed[name] {
				t.Errorf("line %d: a second TYPE for %s", i+1, name)
			}
			typed[name] = true
		case helpLine.MatchString(line):
			name := helpLine.FindStringSubmatch(line)[1]
			if helped[name] {
				t.Errorf("line %d: a second HELP for %s", i+1, name)
			}
			helped[name] = true
		case sampleLine.MatchString(line):
			m := sampleLine.FindStringSubmatch(line)
			if !typed[m[1]] {
				t.Errorf("line %d: sample of %s before its TYPE", i+1, m[1])
			}
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				t.Errorf("line %d: value %q", i+1, m[3])
			}
			out[m[1]+m[2]] = v
		default:
			t.Errorf("line %d is not exposition format: %q", i+1, line)
		}
	}
	return out
}

// enrollAndServe issues a token, runs the enroll line `sema token` printed
// and starts `sema device serve` with serveFlags; it returns once the
// device is online.
func enrollAndServe(t *testing.T, s *laneServer, ws string, serveFlags ...string) (stateDir, deviceID string, serve *proc) {
	t.Helper()
	stateDir, deviceID = enroll(t, s, ws)
	serve = startServe(t, stateDir, serveFlags...)
	waitFor(t, "the device to come online", func() bool { return s.online(t, deviceID) })
	return stateDir, deviceID, serve
}

// enroll issues a token and runs the enroll line `sema token` printed.
func enroll(t *testing.T, s *laneServer, ws string) (stateDir, deviceID string) {
	t.Helper()
	line, errOut, code := s.sema(t, nil, "token", "--workspace", ws)
	if code != 0 {
		t.Fatalf("token: exit %d: %s", code, errOut)
	}
	line = strings.TrimSpace(line)
	prefix := "sema device enroll --server " + s.url + " --token set_"
	if !strings.HasPrefix(line, prefix) || !strings.HasSuffix(line, " --workspace "+ws) {
		t.Fatalf("token printed %q", line)
	}
	if strings.Contains(errOut, "set_") || strings.Contains(errOut, s.key) {
		t.Errorf("token's note carries a secret: %s", errOut)
	}
	stateDir = t.TempDir()
	args := append(strings.Fields(line)[1:], "--state-dir", stateDir)
	out, errOut, code := s.sema(t, nil, args...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", line, code, errOut)
	}
	return stateDir, strings.TrimSpace(out)
}
