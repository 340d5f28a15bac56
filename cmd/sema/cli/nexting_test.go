package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/nexting"
)

var nxUpdateGolden = flag.Bool("update-golden", false, "rewrite the golden files of the nexting CLI tests")

// The vectors copied into the nexting package (never ../shared).
const nxVectorDir = "../../../nexting/testdata"

// nxRun runs the CLI in-process with stdin and returns stdout and the
// exit code. Tests using it do not run in parallel (the writers are
// package variables).
func nxRun(t *testing.T, stdin io.Reader, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cli.Stdin, cli.Stdout, cli.Stderr = stdin, &out, &errOut
	t.Cleanup(func() { cli.Stdin, cli.Stdout, cli.Stderr = os.Stdin, os.Stdout, os.Stderr })
	code := cli.Run(t.Context(), args)
	return out.String(), code
}

func nxGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "nexting", name)
	if *nxUpdateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (run with -update-golden after checking):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// nxFrameVectors is one message vector file: its valid and invalid frames.
type nxFrameVectors struct {
	name           string
	valid, invalid []string
}

func nxLoadFrameVectors(t *testing.T) []nxFrameVectors {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(nxVectorDir, "*-v1.json"))
	if err != nil || len(files) != 10 {
		t.Fatalf("vector files: %v %v", files, err)
	}
	var out []nxFrameVectors
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "device-info") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var vf struct{ Valid, Invalid []json.RawMessage }
		if err := json.Unmarshal(raw, &vf); err != nil {
			t.Fatal(err)
		}
		fv := nxFrameVectors{name: strings.TrimSuffix(filepath.Base(f), ".json")}
		fv.valid = nxWires(t, vf.Valid)
		fv.invalid = nxWires(t, vf.Invalid)
		out = append(out, fv)
	}
	return out
}

// wires reads the two published shapes of a vector: a bare string, or an
// object with "wire".
func nxWires(t *testing.T, list []json.RawMessage) []string {
	var out []string
	for _, raw := range list {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var o struct{ Wire string }
			if err := json.Unmarshal(raw, &o); err != nil || o.Wire == "" {
				t.Fatalf("vector %s", raw)
			}
			s = o.Wire
		}
		out = append(out, s)
	}
	return out
}

type nxVerdict struct {
	OK   bool   `json:"ok"`
	T    string `json:"t"`
	Code string `json:"code"`
}

func nxVerdicts(t *testing.T, out string) []nxVerdict {
	t.Helper()
	var vs []nxVerdict
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var v nxVerdict
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		vs = append(vs, v)
	}
	return vs
}

// Every canonical frame, streamed file by file: valid frames print ok with
// their type, invalid ones a code from the error set. The output is
// golden, and the same whatever the chunking of stdin.
func TestNextingValidateVectors(t *testing.T) {
	codes := map[string]bool{}
	for _, c := range nexting.Codes() {
		codes[string(c)] = true
	}
	for _, fv := range nxLoadFrameVectors(t) {
		t.Run(fv.name, func(t *testing.T) {
			stream := strings.Join(fv.valid, "") + strings.Join(fv.invalid, "")
			out, code := nxRun(t, strings.NewReader(stream), "nexting", "validate")
			nxGolden(t, "validate-"+fv.name+".golden", out)
			if want := 0; len(fv.invalid) == 0 && code != want || len(fv.invalid) > 0 && code != 1 {
				t.Fatalf("exit %d", code)
			}
			vs := nxVerdicts(t, out)
			if len(vs) != len(fv.valid)+len(fv.invalid) {
				t.Fatalf("%d verdicts for %d frames", len(vs), len(fv.valid)+len(fv.invalid))
			}
			for i, w := range fv.valid {
				var m struct{ T string }
				json.Unmarshal([]byte(w), &m)
				if !vs[i].OK || vs[i].T != m.T || vs[i].Code != "" {
					t.Errorf("valid %s: %+v", w, vs[i])
				}
			}
			for i, w := range fv.invalid {
				v := vs[len(fv.valid)+i]
				if v.OK || v.T != "" || !codes[v.Code] {
					t.Errorf("invalid %q: %+v", w, v)
				}
			}
			one, _ := nxRun(t, iotest.OneByteReader(strings.NewReader(stream)), "nexting", "validate")
			if one != out {
				t.Fatalf("byte by byte:\n%s\nin one read:\n%s", one, out)
			}
		})
	}
}

// With --device-info only the profiles negotiated with that device are
// accepted: a valid frame of another profile is unsupported_profile.
func TestNextingValidateWithDeviceInfo(t *testing.T) {
	info := filepath.Join(t.TempDir(), "info.json")
	// approval/1 and status/1 with slots; frames up to 1024 bytes.
	if err := os.WriteFile(info, []byte(`{"protocol":"nexting-device","spec":"0.2.0","wire":[1],"profiles":["approval/1","status/1"],`+
		`"model":"m","fw":"1","max_message_bytes":1024,"max_summary_bytes":240,"statusSlots":2}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stream strings.Builder
	for _, fv := range nxLoadFrameVectors(t) {
		for _, w := range fv.valid {
			stream.WriteString(w)
		}
	}
	stream.WriteString(`{"v":1,"t":"answer","id":"r1","ch":"allow","pad":"` + strings.Repeat("x", 1000) + `"}` + "\n")
	out, code := nxRun(t, strings.NewReader(stream.String()), "nexting", "validate", "--device-info", info)
	nxGolden(t, "validate-negotiated.golden", out)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	seen := map[string]int{}
	for _, v := range nxVerdicts(t, out) {
		seen[fmt.Sprintf("%v %s%s", v.OK, v.T, v.Code)]++
	}
	if seen["false unsupported_profile"] == 0 || seen["true present"] == 0 || seen["true status"] == 0 || seen["false message_too_large"] != 1 {
		t.Fatalf("verdicts: %v", seen)
	}

	if _, code := nxRun(t, strings.NewReader(""), "nexting", "validate", "--device-info", info+".missing"); code != cli.ExitFailure {
		t.Fatalf("a missing Device Info file: exit %d", code)
	}
}

// Only complete frames print: a trailing partial frame prints nothing,
// even when the framer has already refused it (bad UTF-8, oversize).
func TestNextingValidatePartialFrames(t *testing.T) {
	ok := `{"v":1,"t":"answer","id":"r1","ch":"allow"}` + "\n"
	for _, c := range []struct {
		name, stream, want string
		code               int
	}{
		{"empty input", "", "", 0},
		{"partial object", ok + `{"v":1,"t":"ans`, `{"ok":true,"t":"answer"}` + "\n", 0},
		{"partial with bad UTF-8", ok + "{\"v\":1,\xff", `{"ok":true,"t":"answer"}` + "\n", 0},
		{"partial oversize", ok + strings.Repeat("x", 5000), `{"ok":true,"t":"answer"}` + "\n", 0},
		{"oversize completed", strings.Repeat("x", 5000) + "\n" + ok, `{"ok":false,"code":"message_too_large"}` + "\n" + `{"ok":true,"t":"answer"}` + "\n", 1},
		{"bad UTF-8 completed", "{\xff}\n" + ok, `{"ok":false,"code":"bad_message"}` + "\n" + `{"ok":true,"t":"answer"}` + "\n", 1},
		{"empty line", "\n", `{"ok":false,"code":"bad_message"}` + "\n", 1},
		{"unknown type", `{"v":1,"t":"launch"}` + "\n", `{"ok":false,"code":"bad_message"}` + "\n", 1},
		{"wrong version", `{"v":2,"t":"answer","id":"r1","ch":"allow"}` + "\n", `{"ok":false,"code":"unsupported_version"}` + "\n", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := nxRun(t, strings.NewReader(c.stream), "nexting", "validate")
			if out != c.want || code != c.code {
				t.Fatalf("got %q exit %d, want %q exit %d", out, code, c.want, c.code)
			}
			if one, _ := nxRun(t, iotest.OneByteReader(strings.NewReader(c.stream)), "nexting", "validate"); one != out {
				t.Fatalf("byte by byte: %q", one)
			}
		})
	}
}

// Device Info vectors: valid values print what a host negotiates, invalid
// core values an error; an invalid vendor section is dropped and the rest
// stays valid. One golden line per vector.
func TestNextingDevinfoVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(nxVectorDir, "device-info-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		Valid, InvalidCore []struct{ Name, Wire string }
		InvalidVendor      []struct {
			Name   string
			Vendor json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	type ran struct {
		out  string
		code int
	}
	results := map[string]ran{}
	devinfo := func(name, value string) ran {
		out, code := nxRun(t, strings.NewReader(value), "nexting", "devinfo")
		r := ran{out, code}
		results[name] = r
		return r
	}
	for _, v := range vf.Valid {
		if r := devinfo("valid/"+v.Name, v.Wire); r.code != 0 || !strings.HasPrefix(r.out, `{"ok":true,"profiles":["approval/1"`) {
			t.Errorf("valid %s: %+v", v.Name, r)
		}
	}
	for _, v := range vf.InvalidCore {
		if r := devinfo("invalidCore/"+v.Name, v.Wire); r.code != 1 || !strings.HasPrefix(r.out, `{"ok":false,"error":"nexting: `) {
			t.Errorf("invalidCore %s: %+v", v.Name, r)
		}
	}
	core := strings.TrimSuffix(vf.Valid[0].Wire, "}")
	for _, v := range vf.InvalidVendor {
		if r := devinfo("invalidVendor/"+v.Name, core+`,"vendor":`+string(v.Vendor)+"}"); r.code != 0 || !strings.HasPrefix(r.out, `{"ok":true`) {
			t.Errorf("invalidVendor %s: %+v", v.Name, r)
		}
	}
	devinfo("pretty-printed with a trailing newline", "{\n  \"protocol\": \"nexting-device\", \"spec\": \"1\", \"wire\": [1],\n"+
		"  \"profiles\": [\"approval/1\", \"status/1\", \"text/1\", \"future/9\"], \"model\": \"m\", \"fw\": \"1\",\n"+
		"  \"max_message_bytes\": 100000, \"max_summary_bytes\": 64, \"statusSlots\": 4\n}\n")
	devinfo("status without slots", `{"protocol":"nexting-device","spec":"1","wire":[1],"profiles":["approval/1","status/1"],"model":"m","fw":"1","max_message_bytes":512,"max_summary_bytes":1}`)
	devinfo("oversize", `{"x":"`+strings.Repeat("a", 4100)+`"}`)
	devinfo("empty", "")

	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	var g strings.Builder
	for _, n := range names {
		fmt.Fprintf(&g, "%s\texit %d\t%s", n, results[n].code, results[n].out)
	}
	nxGolden(t, "devinfo.golden", g.String())
}

// nxOutput is a Stdout the simulator writes from its goroutine while the
// test reads it.
type nxOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{}
}

func (b *nxOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.ch <- struct{}{}:
	default:
	}
	return n, err
}

func (b *nxOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output holds s.
func (b *nxOutput) waitFor(ctx context.Context, t *testing.T, s string) {
	t.Helper()
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.ch:
		case <-ctx.Done():
			t.Fatalf("the simulator never printed %q; it printed:\n%s", s, b.String())
		}
	}
}

// The simulator end to end through the CLI: a host session over its unix
// socket asks; the output shows the prompt, its TTL and the status; keys
// typed on stdin answer; q quits.
func TestNextingSim(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	keys, typeKeys := io.Pipe()
	out := &nxOutput{ch: make(chan struct{}, 1)}
	cli.Stdin, cli.Stdout, cli.Stderr = keys, out, io.Discard
	defer func() { cli.Stdin, cli.Stdout, cli.Stderr = os.Stdin, os.Stdout, os.Stderr }()
	exit := make(chan int, 1)
	go func() { exit <- cli.Run(ctx, []string{"nexting", "sim", "--listen", "unix:" + sock}) }()
	out.waitFor(ctx, t, "listening on unix:"+sock)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}

	conn, err := nxDialUnix(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	s, err := nexting.OpenStream(ctx, conn, nexting.SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetStatus([]nexting.Agent{{Slot: 0, State: nexting.AgentNeedsInput, Label: "deploy"}}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(ctx, t, `status: [0 needs_input deploy]`)

	ask := func(summary string) <-chan nexting.Decision {
		ch := make(chan nexting.Decision, 1)
		go func() {
			d, err := s.Ask(ctx, summary, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			ch <- d
		}()
		return ch
	}
	d := ask("Run: git push origin main")
	out.waitFor(ctx, t, "pending r1: Run: git push origin main (ttl ")
	io.WriteString(typeKeys, "a\n")
	if got := <-d; got != nexting.DecisionAllow {
		t.Fatalf("decision %s", got)
	}
	d = ask("Run: rm -rf /\x1b[2J")
	out.waitFor(ctx, t, `pending r2: Run: rm -rf /\x1b[2J`) // control characters never reach the terminal raw
	io.WriteString(typeKeys, "n")
	if got := <-d; got != nexting.DecisionDeny {
		t.Fatalf("decision %s", got)
	}
	io.WriteString(typeKeys, "y") // nothing pending
	out.waitFor(ctx, t, "nothing to answer")

	// A second host is turned away while the first is connected.
	if c2, err := nxDialUnix(ctx, sock); err == nil {
		out.waitFor(ctx, t, "refused another host")
		c2.Close()
	}
	io.WriteString(typeKeys, "q")
	if code := <-exit; code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	typeKeys.Close()
	<-s.Done() // the simulator closed the connection
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket outlived the simulator: %v", err)
	}
}

func nxDialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

func TestNextingUsage(t *testing.T) {
	for _, args := range [][]string{
		{"nexting"},
		{"nexting", "sim", "--listen", "tcp:127.0.0.1:1"},
		{"nexting", "validate", "extra"},
	} {
		if _, code := nxRun(t, strings.NewReader(""), args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}
