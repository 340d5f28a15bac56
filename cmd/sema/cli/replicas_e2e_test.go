package cli_test

import (
	"crypto/rand"
	"database/sql"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/cmd/sema/cli"
	"github.com/sema-agent/sema/mcp"
)

// postgresSchema points $SEMA_POSTGRES_URL (inherited by the servers the
// test starts) at a fresh schema of the test PostgreSQL, dropped at the
// end; it returns a connection to the database.
func postgresSchema(t *testing.T) (admin *sql.DB, schema string) {
	t.Helper()
	base := os.Getenv("SEMA_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SEMA_TEST_POSTGRES is not set: CI must run the PostgreSQL tests (run them through `make test`)")
		}
		t.Skip("!!! SKIPPING a test of `sema server --postgres`: SEMA_TEST_POSTGRES is not set; run `make test` to start a throwaway PostgreSQL")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema = "t_" + strings.ToLower(rand.Text())
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Setenv(cli.EnvPostgres, u.String())
	return admin, schema
}

// tcpBalancer is a small TCP load balancer, as haproxy in mode tcp: each
// connection goes to the next backend in turn, or to the next that takes
// it when one refuses (a dead replica), and is piped both ways until
// either side ends. Nothing is sticky.
type tcpBalancer struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	pinned   int // a backend every new connection goes to; -1: in turn
}

func startBalancer(t *testing.T) *tcpBalancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &tcpBalancer{ln: ln, pinned: -1}
	t.Cleanup(func() { ln.Close() })
	go lb.serve()
	return lb
}

func (lb *tcpBalancer) url() string { return "http://" + lb.ln.Addr().String() }

func (lb *tcpBalancer) pin(i int) { lb.mu.Lock(); lb.pinned = i; lb.mu.Unlock() }

func (lb *tcpBalancer) serve() {
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			return
		}
		go lb.proxy(c)
	}
}

// order is the backends to try for one connection, the chosen one first.
func (lb *tcpBalancer) order() []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	first := lb.pinned
	if first < 0 {
		first = lb.next % len(lb.backends)
		lb.next++
	}
	return append(slices.Clone(lb.backends[first:]), lb.backends[:first]...)
}

func (lb *tcpBalancer) proxy(c net.Conn) {
	defer c.Close()
	for _, b := range lb.order() {
		up, err := net.DialTimeout("tcp", b, time.Second)
		if err != nil {
			continue
		}
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() { io.Copy(up, c); done <- struct{}{} }()
		go func() { io.Copy(c, up); done <- struct{}{} }()
		<-done
		return
	}
}

// startReplica starts one more `sema server` on the registry the first
// one made; it uses the first one's admin key.
func startReplica(t *testing.T, first *laneServer, flags ...string) *laneServer {
	t.Helper()
	data := t.TempDir()
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--data", data}, flags...)
	s := &laneServer{proc: startProc(t, nil, nil, args...), data: data, key: first.key}
	waitFor(t, "the replica to listen", func() bool {
		m := listeningURL.FindStringSubmatch(s.stderr.String())
		if m != nil {
			s.url = m[1]
		}
		return m != nil
	})
	return s
}

func hostPort(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// ledger reads the lines the instructions appended to a device's file.
func ledger(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	slices.Sort(lines)
	return lines
}

// Three replicas of `sema server --postgres` on one
// registry behind a TCP load balancer, a real `sema device serve` held by
// each. Every replica dispatches to every device, with `sema run` and an
// MCP client; one replica is killed with an instruction in flight that
// another replica forwarded to it: its device moves at once (before the
// dead replica's lease would expire), the instruction ends "may have run",
// the device stops it. Then another replica is stopped with SIGTERM, as a
// rolling deploy does: its devices reconnect to the last one at once. Every
// instruction ran exactly once.
func TestThreeReplicasBehindALoadBalancer(t *testing.T) {
	admin, schema := postgresSchema(t)
	lb := startBalancer(t)
	public := []string{"--public-url", lb.url()}
	reps := []*laneServer{startServer(t, t.TempDir(), public...)}
	reps = append(reps, startReplica(t, reps[0], public...), startReplica(t, reps[0], public...))
	for _, r := range reps {
		lb.backends = append(lb.backends, hostPort(t, r.url))
	}
	front := &laneServer{url: lb.url(), key: reps[0].key}

	// One device on each replica: the balancer sends each device's
	// connections to its replica while it enrolls and connects.
	ids, books, states := make([]string, 3), make([]string, 3), make([]string, 3)
	var serves []*proc
	for k := range reps {
		lb.pin(k)
		ws := t.TempDir()
		var serve *proc
		states[k], ids[k], serve = enrollAndServe(t, front, ws)
		serves = append(serves, serve)
		books[k] = filepath.Join(ws, "ledger")
	}
	lb.pin(-1)
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range reps {
				t.Logf("replica %d:\n%s", i, r.stderr)
				t.Logf("device %d:\n%s", i, serves[i].stderr)
			}
		}
	})
	holders := map[string]bool{}
	for _, d := range reps[1].devices(t) {
		if d["online"] != true {
			t.Fatalf("device %v is not online", d)
		}
		holders[d["replica"].(string)] = true
	}
	if len(holders) != 3 {
		t.Fatalf("the devices are held by %d replicas; want 3 (one each)", len(holders))
	}

	// Every replica dispatches to every device; two of three are forwarded.
	for i, r := range reps {
		for k := range ids {
			tag := "run-" + string(rune('a'+i))
			if out, errOut, code := r.sema(t, nil, "run", "--device", ids[k], "--", "echo "+tag+" >> "+books[k]+"; echo ok"); code != 0 || out != "ok\n" {
				t.Fatalf("sema run through replica %d to device %d: exit %d, %q %s", i, k, code, out, errOut)
			}
		}
	}
	forwarded := 0.0
	for _, r := range reps {
		forwarded += r.metrics(t)["sema_lane_forwarded_total"]
	}
	if forwarded != 6 {
		t.Fatalf("the replicas forwarded %v dispatches; want 6 (each to the two devices it does not hold)", forwarded)
	}
	// Each device's own journal shows the three, forwarded or not, once each.
	for k := range ids {
		waitFor(t, "the device's journal to show its three runs", func() bool {
			out, _, _ := front.sema(t, nil, "device", "log", "--state-dir", states[k])
			for i := range reps {
				if strings.Count(out, "echo run-"+string(rune('a'+i))) != 1 {
					return false
				}
			}
			return true
		})
	}
	// The lane's history, read on any replica, has each of the nine once:
	// a forwarded instruction is recorded by the replica holding the
	// device, never also by the one that forwarded it.
	holderOf := map[string]string{}
	for _, d := range reps[1].devices(t) {
		holderOf[d["deviceId"].(string)] = d["replica"].(string)
	}
	var history []api.InstructionRecord
	waitFor(t, "the history to hold the nine runs", func() bool {
		history = historyRows(t, reps[2])
		return len(history) >= 9
	})
	times := map[string]int{}
	for _, r := range history {
		times[r.Summary]++
		if r.Replica != holderOf[r.DeviceID] || r.Outcome != "ok" {
			t.Errorf("a run recorded by replica %s with outcome %s; its device is held by %s", r.Replica, r.Outcome, holderOf[r.DeviceID])
		}
	}
	for i := range reps {
		for k := range ids {
			if run := "echo run-" + string(rune('a'+i)) + " >> " + books[k] + "; echo ok"; times[run] != 1 {
				t.Errorf("%q is in the history %d times, want exactly once", run, times[run])
			}
		}
	}
	// The replicas wrote one history chain and one audit chain between
	// them, which verify through any replica.
	if out, errOut, code := reps[1].sema(t, nil, "audit", "verify"); code != 0 || strings.Count(out, "verified ") != 2 {
		t.Fatalf("audit verify through replica 1: exit %d %q %s", code, out, errOut)
	}
	// An MCP client on one replica reaches a device another holds; the
	// history names the MCP client's own address, not the lane's.
	cs, err := mcpHTTP(t, reps[2], reps[0].key, "?device="+ids[0])
	if err != nil {
		t.Fatal(err)
	}
	var res mcp.RunResult
	callTool(t, cs, "run_command", map[string]any{"command": "echo mcp >> " + books[0] + "; echo ok"}, &res)
	if res.ExitCode != 0 || res.Stdout != "ok\n" || res.DeviceID != ids[0] {
		t.Fatalf("run_command through another replica: %+v", res)
	}
	waitFor(t, "the MCP call in the history", func() bool {
		for _, r := range historyRows(t, reps[0]) {
			if strings.HasPrefix(r.Summary, "echo mcp") {
				if r.RemoteAddr != "127.0.0.1" {
					t.Fatalf("the MCP call's history row names %q as its caller; want the client's 127.0.0.1", r.RemoteAddr)
				}
				return true
			}
		}
		return false
	})

	// Replica 1 forwards a long instruction to replica 0, which is killed.
	inflight := startProc(t, reps[1].env(t), nil, "run", "--device", ids[0], "--", "echo inflight >> "+books[0]+"; exec sleep 61.7")
	waitFor(t, "the instruction to start", func() bool {
		select {
		case <-inflight.done:
			t.Fatalf("sema run ended before the kill: %v\n%s%s", inflight.err, inflight.stdout, inflight.stderr)
		default:
		}
		return slices.Contains(ledger(t, books[0]), "inflight") || t.Failed()
	})
	var dead string
	if err := admin.QueryRowContext(t.Context(), "SELECT lease_replica FROM "+schema+".devices WHERE id = $1", ids[0]).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	reps[0].cmd.Process.Kill()
	if code := inflight.wait(t); code != cli.ExitLaneFailure {
		t.Fatalf("the instruction in flight on the killed replica: exit %d, want %d (it may have run)\n%s", code, cli.ExitLaneFailure, inflight.stderr)
	}
	waitFor(t, "the device to move to a live replica", func() bool {
		for _, d := range reps[1].devices(t) {
			if d["deviceId"] == ids[0] {
				return d["online"] == true && d["replica"] != dead
			}
		}
		return false
	})
	// The lease TTL is 45 s: a device that waited for it would move later.
	if moved := time.Since(killed); moved > 30*time.Second {
		t.Fatalf("the device moved %v after the kill; want it taken over at once, not after the lease TTL", moved)
	} else {
		t.Logf("the device moved %v after its replica was killed", moved.Round(time.Millisecond))
	}
	waitFor(t, "the executor to stop the instruction the lane no longer lists (R2)", func() bool {
		return exec.Command("pgrep", "-f", "sleep 61.7").Run() != nil
	})

	// After the kill: through the balancer, each device once more.
	for k := range ids {
		if out, errOut, code := front.sema(t, nil, "run", "--device", ids[k], "--", "echo after >> "+books[k]+"; echo ok"); code != 0 || out != "ok\n" {
			t.Fatalf("sema run through the balancer to device %d after the kill: exit %d, %q %s", k, code, out, errOut)
		}
	}
	cs2, err := mcpHTTP(t, front, reps[0].key, "?device="+ids[0])
	if err != nil {
		t.Fatal(err)
	}
	callTool(t, cs2, "run_command", map[string]any{"command": "echo mcp-after >> " + books[0] + "; echo ok"}, &res)
	if res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Fatalf("run_command through the balancer after the kill: %+v", res)
	}

	// A rolling deploy: replica 1 is stopped with SIGTERM. It drains (bye
	// draining), and its devices reconnect to the last replica at once.
	drained := time.Now()
	reps[1].cmd.Process.Signal(syscall.SIGTERM)
	if code := reps[1].wait(t); code != 0 {
		t.Fatalf("the drained replica exited %d\n%s", code, reps[1].stderr)
	}
	var last any // the replica that holds device 2 from the start
	for _, d := range reps[2].devices(t) {
		if d["deviceId"] == ids[2] {
			last = d["replica"]
		}
	}
	waitFor(t, "every device to reconnect to the last replica", func() bool {
		for _, d := range reps[2].devices(t) {
			if d["online"] != true || d["replica"] != last {
				return false
			}
		}
		return true
	})
	t.Logf("the devices moved %v after their replica was told to drain", time.Since(drained).Round(time.Millisecond))
	for k := range ids {
		if out, errOut, code := front.sema(t, nil, "run", "--device", ids[k], "--", "echo drained >> "+books[k]+"; echo ok"); code != 0 || out != "ok\n" {
			t.Fatalf("sema run through the balancer to device %d after the drain: exit %d, %q %s", k, code, out, errOut)
		}
	}

	// Every instruction accounted for, none run twice.
	want := [][]string{
		{"after", "drained", "inflight", "mcp", "mcp-after", "run-a", "run-b", "run-c"},
		{"after", "drained", "run-a", "run-b", "run-c"},
		{"after", "drained", "run-a", "run-b", "run-c"},
	}
	for k := range books {
		if got := ledger(t, books[k]); !slices.Equal(got, want[k]) {
			t.Errorf("device %d ran %v; want each exactly once: %v", k, got, want[k])
		}
	}
}

// Eight replicas of `sema server --postgres` started at once on an empty
// registry make one admin: exactly one writes an admin.key and prints the
// first start's key, and the registry holds one admin identity.
func TestEightReplicasStartingAtOnceMakeOneAdmin(t *testing.T) {
	admin, schema := postgresSchema(t)
	var procs []*proc
	var dirs []string
	for range 8 {
		data := t.TempDir()
		dirs = append(dirs, data)
		procs = append(procs, startProc(t, nil, nil, "server", "--listen", "127.0.0.1:0", "--data", data))
	}
	for i, p := range procs {
		waitFor(t, "replica "+string(rune('0'+i))+" to listen", func() bool {
			select {
			case <-p.done:
				t.Fatalf("replica %d exited: %v\n%s", i, p.err, p.stderr)
			default:
			}
			return listeningURL.MatchString(p.stderr.String())
		})
	}
	keys, printed := 0, 0
	for i, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, cli.AdminKeyFile)); err == nil {
			keys++
		}
		if strings.Contains(procs[i].stdout.String(), "First start: created the admin identity") {
			printed++
		}
	}
	var admins int
	if err := admin.QueryRowContext(t.Context(), `SELECT count(*) FROM `+schema+`.identities WHERE admin`).Scan(&admins); err != nil {
		t.Fatal(err)
	}
	if keys != 1 || printed != 1 || admins != 1 {
		t.Fatalf("%d admin.key files, %d first-start messages, %d admins in the registry; want 1, 1, 1", keys, printed, admins)
	}
}
