package cli_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/device"
)

func TestServerFirstStartAndRestart(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	fi, err := os.Stat(filepath.Join(data, cli.AdminKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key: %v %v", fi, err)
	}
	if !strings.HasPrefix(s.key, "sema_") || strings.Count(s.stdout.String(), s.key) != 1 {
		t.Fatalf("the first start printed:\n%s", s.stdout)
	}
	if strings.Contains(s.stderr.String(), s.key) {
		t.Error("the key is in the logs")
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, s.stderr)
	}

	again := startServer(t, data)
	if again.key != s.key {
		t.Error("a restart replaced admin.key")
	}
	if out := again.stdout.String(); strings.Contains(out, "sema_") {
		t.Errorf("a restart printed a key:\n%s", out)
	}
	if !strings.Contains(again.stderr.String(), "admin identity exists") {
		t.Errorf("restart logs:\n%s", again.stderr)
	}
	// The key still works, also from the file.
	p := startProc(t, []string{cli.EnvAPIKey + "="}, nil, "devices", "--server", again.url, "--admin-key-file", filepath.Join(data, cli.AdminKeyFile))
	if code := p.wait(t); code != 0 || !strings.Contains(p.stderr.String(), "No devices yet") {
		t.Fatalf("devices: exit %d: %s", code, p.stderr)
	}
	// A wrong key is the lane's 403.
	p = startProc(t, []string{cli.EnvAPIKey + "=sema_wrong"}, nil, "devices", "--server", again.url)
	if code := p.wait(t); code != cli.ExitFailure || !strings.Contains(p.stderr.String(), "auth.forbidden") {
		t.Fatalf("wrong key: exit %d: %s", code, p.stderr)
	}
	again.cmd.Process.Signal(syscall.SIGINT)
	if code := again.wait(t); code != 0 {
		t.Fatalf("SIGINT: exit %d", code)
	}
}

// The whole lane with real processes: token → enroll → serve → run → fs →
// devices → status → metrics → revoke.
func TestLaneEndToEnd(t *testing.T) {
	s := startServer(t, t.TempDir())
	ws := t.TempDir()
	stateDir, id, serve := enrollAndServe(t, s, ws)

	// run: the remote exit code, stdout and stderr in the order they were written.
	var combined syncBuffer
	p := &proc{cmd: exec.Command(semaBin, "run", "--", "echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three; exit 7"), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), s.env(t)...)
	p.cmd.Stdout, p.cmd.Stderr = &combined, &combined
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(p.done); p.err = p.cmd.Wait() }()
	if code := p.wait(t); code != 7 {
		t.Fatalf("run: exit %d, want 7: %s", code, combined.String())
	}
	if got, want := combined.String(), "one\ntwo\nthree\n"; got != want {
		t.Errorf("run wrote %q, want %q", got, want)
	}

	// run streams live: the first line is here while the command still runs.
	gate := filepath.Join(t.TempDir(), "gate")
	live := startProc(t, s.env(t), nil, "run", "--device", id, "--cwd", ".", "--",
		fmt.Sprintf("echo first; pwd; while [ ! -e %s ]; do sleep 0.01; done; echo second", gate))
	waitFor(t, "the first line", func() bool { return strings.Contains(live.stdout.String(), "first\n"+ws+"\n") })
	if strings.Contains(live.stdout.String(), "second") {
		t.Fatal("second before the gate")
	}
	os.WriteFile(gate, nil, 0o600)
	if code := live.wait(t); code != 0 || live.stdout.String() != "first\n"+ws+"\nsecond\n" {
		t.Fatalf("live run: exit %d, %q, %s", code, live.stdout, live.stderr)
	}

	// fs: put (through stdin, over a payload part) and cat round trip, ls, stat, mkdir, rm.
	content := make([]byte, 300<<10)
	rand.Read(content)
	if _, errOut, code := s.sema(t, nil, "fs", "mkdir", "-p", "sub/dir"); code != 0 {
		t.Fatalf("mkdir: %d %s", code, errOut)
	}
	out, errOut, code := s.sema(t, bytes.NewReader(content), "fs", "put", "-", "sub/dir/blob.bin")
	if code != 0 || !strings.Contains(out, "created "+filepath.Join(ws, "sub/dir/blob.bin")) {
		t.Fatalf("put: exit %d: %s %s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub/dir/blob.bin")); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("the device's file differs: %v", err)
	}
	out, errOut, code = s.sema(t, nil, "fs", "cat", filepath.Join(ws, "sub/dir/blob.bin"))
	if code != 0 || out != string(content) {
		t.Fatalf("cat: exit %d, %d bytes: %s", code, len(out), errOut)
	}
	out, _, code = s.sema(t, nil, "fs", "ls", "-l", "sub/dir")
	if code != 0 || !strings.Contains(out, "file") || !strings.Contains(out, strconv.Itoa(len(content))) || !strings.Contains(out, "blob.bin") {
		t.Fatalf("ls: exit %d: %s", code, out)
	}
	out, _, code = s.sema(t, nil, "fs", "stat", "sub/dir/blob.bin")
	if code != 0 || !strings.Contains(out, "kind   file") || !strings.Contains(out, "size   "+strconv.Itoa(len(content))) {
		t.Fatalf("stat: exit %d: %s", code, out)
	}
	local := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(local, []byte("notes\n"), 0o600)
	if out, errOut, code := s.sema(t, nil, "fs", "put", local, "notes.txt"); code != 0 || out != "created "+filepath.Join(ws, "notes.txt")+" (6 bytes)\n" {
		t.Fatalf("put of a local file: exit %d: %q %s", code, out, errOut)
	}
	if out, _, code := s.sema(t, nil, "fs", "put", local, "notes.txt"); code != 0 || !strings.HasPrefix(out, "wrote ") {
		t.Fatalf("put over it: exit %d: %q", code, out)
	}
	if _, errOut, code := s.sema(t, nil, "fs", "cat", "nope.txt"); code != cli.ExitFailure || !strings.Contains(errOut, "not_found") {
		t.Fatalf("cat of a missing file: exit %d: %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "fs", "rm", "sub"); code != cli.ExitFailure || !strings.Contains(errOut, "invalid") {
		t.Fatalf("rm of a full dir without -r: exit %d: %s", code, errOut)
	}
	if _, errOut, code := s.sema(t, nil, "fs", "rm", "-r", "sub"); code != 0 {
		t.Fatalf("rm -r: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "sub")); !os.IsNotExist(err) {
		t.Fatalf("sub survived rm -r: %v", err)
	}

	// devices and the device's own status.
	out, _, code = s.sema(t, nil, "devices")
	if code != 0 || !regexp.MustCompile(id+`\s+\S+\s+linux/\S+\s+online\s+1\s+0\s`).MatchString(out) {
		t.Fatalf("devices: exit %d:\n%s", code, out)
	}
	st := startProc(t, nil, nil, "device", "status", "--state-dir", stateDir)
	if code := st.wait(t); code != 0 || !strings.Contains(st.stdout.String(), "connected, gen 1") || !strings.Contains(st.stdout.String(), id) {
		t.Fatalf("status: exit %d:\n%s%s", code, st.stdout, st.stderr)
	}

	// A refused enrollment is counted by its reason (and never names the token).
	if _, errOut, code := s.sema(t, nil, "device", "enroll", "--server", s.url, "--token", "set_bogus", "--workspace", ws, "--state-dir", t.TempDir()); code != cli.ExitFailure {
		t.Fatalf("enroll with a bogus token: exit %d: %s", code, errOut)
	}

	// metrics: the exposition parses and counts what happened.
	m := s.metrics(t)
	for name, want := range map[string]float64{
		`sema_lane_connected_devices`:                                      1,
		`sema_lane_inflight_instructions`:                                  0,
		`sema_lane_dispatches_total{state="terminal",outcome="exec"}`:      2,
		`sema_lane_dispatches_total{state="terminal",outcome="not_found"}`: 1,
		`sema_lane_events_total{event="device.enrolled",reason=""}`:        1,
		`sema_lane_refusals_total{what="enroll",reason="token_unknown"}`:   1,
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}

	// forget refuses while serve holds the lock.
	fg := startProc(t, []string{"TMPDIR=" + t.TempDir()}, nil, "device", "forget", "--state-dir", stateDir)
	if code := fg.wait(t); code != cli.ExitLocked || !strings.Contains(fg.stderr.String(), "already serving") {
		t.Fatalf("forget while serving: exit %d: %s", code, fg.stderr)
	}

	// revoke: serve is told, deletes its key and exits 3; nothing runs any more.
	out, errOut, code = s.sema(t, nil, "devices", "revoke", id)
	if code != 0 || out != "revoked "+id+"\n" {
		t.Fatalf("revoke: exit %d: %s %s", code, out, errOut)
	}
	if code := serve.wait(t); code != cli.ExitRevoked {
		t.Fatalf("serve after revoke: exit %d:\n%s", code, serve.stderr)
	}
	if _, err := os.Stat(filepath.Join(stateDir, device.KeyFile)); !os.IsNotExist(err) {
		t.Error("the key survived the revocation")
	}
	// A revoked device is left out of the list, unless --all.
	out, errOut, _ = s.sema(t, nil, "devices")
	if strings.Contains(out, id) || !strings.Contains(errOut, "1 revoked one") {
		t.Errorf("devices after revoke: %q %q", out, errOut)
	}
	out, _, _ = s.sema(t, nil, "devices", "--all")
	if !regexp.MustCompile(id + `.*\srevoked\s`).MatchString(out) {
		t.Errorf("devices --all after revoke:\n%s", out)
	}
	if _, errOut, code := s.sema(t, nil, "run", "--device", id, "--", "true"); code != cli.ExitNeverStarted || !strings.Contains(errOut, "target_unavailable") {
		t.Fatalf("run on a revoked device: exit %d: %s", code, errOut)
	}
	if m := s.metrics(t); m[`sema_lane_connected_devices`] != 0 || m[`sema_lane_dispatches_total{state="terminal_never_started",outcome="target_unavailable"}`] != 1 {
		t.Errorf("metrics after revoke: %v", m)
	}
	fg = startProc(t, nil, nil, "device", "forget", "--state-dir", stateDir)
	if code := fg.wait(t); code != 0 {
		t.Fatalf("forget: exit %d: %s", code, fg.stderr)
	}
	if _, err := os.Stat(filepath.Join(stateDir, device.RecordFile)); !os.IsNotExist(err) {
		t.Error("forget left the record")
	}
	// The lane forgets the revoked device: gone from --all, its audit stays.
	if out, errOut, code := s.sema(t, nil, "devices", "forget", id); code != 0 || out != "forgot "+id+"\n" {
		t.Fatalf("devices forget: exit %d: %q %s", code, out, errOut)
	}
	if out, _, _ := s.sema(t, nil, "devices", "--all"); strings.Contains(out, id) {
		t.Errorf("devices --all after forget still lists %s:\n%s", id, out)
	}
	if _, errOut, code := s.sema(t, nil, "devices", "forget", id); code == 0 || !strings.Contains(errOut, id) {
		t.Errorf("forgetting it twice: exit %d: %s", code, errOut)
	}
	if logs := s.stderr.String() + serve.stderr.String(); strings.Contains(logs, s.key) || strings.Contains(logs, "set_") {
		t.Error("a secret is in the logs")
	}
}

// Ctrl-C on `sema run` cancels the command on the device (its process is
// gone) and exits 130 once the device confirmed.
func TestRunCtrlCCancels(t *testing.T) {
	// The timings are flags; the device sees them in helloAck.
	s := startServer(t, t.TempDir(), "--heartbeat-interval", "2s", "--max-inflight", "2", "--token-ttl", "60s")
	if _, errOut, _ := s.sema(t, nil, "token"); !strings.Contains(errOut, "within 1m0s") {
		t.Errorf("token with --token-ttl 60s: %s", errOut)
	}
	_, id, serve := enrollAndServe(t, s, t.TempDir())
	// The lane counts the device online before serve has logged its helloAck.
	waitFor(t, "serve to log helloAck with the flags' values", func() bool {
		return strings.Contains(serve.stderr.String(), "heartbeatMs=2000 maxInflight=2")
	})
	run := startProc(t, s.env(t), nil, "run", "--device", id, "--", "echo $$; exec sleep 60")
	var pid int
	waitFor(t, "the remote pid", func() bool {
		pid, _ = strconv.Atoi(strings.TrimSpace(run.stdout.String()))
		return pid > 0
	})
	run.cmd.Process.Signal(syscall.SIGINT)
	if code := run.wait(t); code != cli.ExitCancelled || !strings.Contains(run.stderr.String(), "cancelled (killed)") {
		t.Fatalf("exit %d: %s", code, run.stderr)
	}
	waitFor(t, "the remote command to die", func() bool { return !alive(pid) })
}

// SIGTERM drains: the device gets bye draining, work in flight settles
// outcome_unknown (the caller sees 255), and the server exits 0.
func TestServerSIGTERMDrains(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, id, serve := enrollAndServe(t, s, t.TempDir())
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	run := startProc(t, s.env(t), nil, "run", "--device", id, "--", fmt.Sprintf("echo started; while [ ! -e %s ]; do sleep 0.01; done", gate))
	waitFor(t, "the command to start", func() bool { return strings.Contains(run.stdout.String(), "started") })
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("server exit %d:\n%s", code, s.stderr)
	}
	if code := run.wait(t); code != cli.ExitLaneFailure || !strings.Contains(run.stderr.String(), "outcome_unknown") {
		t.Fatalf("run: exit %d: %s", code, run.stderr)
	}
	waitFor(t, "bye draining at the device", func() bool { return strings.Contains(serve.stderr.String(), "reason=draining") })
	if !strings.Contains(s.stderr.String(), `msg=draining`) && !strings.Contains(s.stderr.String(), `msg="draining`) {
		t.Errorf("server logs:\n%s", s.stderr)
	}
	os.WriteFile(gate, nil, 0o600)
	serve.cmd.Process.Signal(syscall.SIGTERM)
	if code := serve.wait(t); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// A server that dies mid-stream leaves the outcome unknown: 255, and the
// message says the command may have run.
func TestRunStreamBroken(t *testing.T) {
	s := startServer(t, t.TempDir())
	_, id, serve := enrollAndServe(t, s, t.TempDir())
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	run := startProc(t, s.env(t), nil, "run", "--device", id, "--", fmt.Sprintf("echo started; while [ ! -e %s ]; do sleep 0.01; done", gate))
	waitFor(t, "the command to start", func() bool { return strings.Contains(run.stdout.String(), "started") })
	s.cmd.Process.Kill()
	if code := run.wait(t); code != cli.ExitLaneFailure || !strings.Contains(run.stderr.String(), "ended before the outcome") ||
		!strings.Contains(run.stderr.String(), "may have run") {
		t.Fatalf("run: exit %d: %s", code, run.stderr)
	}
	os.WriteFile(gate, nil, 0o600)
	serve.cmd.Process.Signal(syscall.SIGTERM)
	if code := serve.wait(t); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}
