package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The forwarding hop: the same work through the replica
// that holds the device's connection (a local dispatch) and through
// another replica of the same registry, which forwards it to the holder,
// one after the other in one run.

// HopMeasure is one row of the hop's table.
type HopMeasure struct {
	Work             string
	Local, Forwarded Result
	Bytes            int64  // a throughput row: bytes per run; else a round trip
	Goal             string // what the hop must achieve on this row
	Met              bool
	Note             string
}

// HopGoalRoundTrip and HopGoalStream are the bounds on what the hop
// may cost: 0.3 ms on an exec true round trip, 20% on a 1 GiB stream.
const (
	HopGoalRoundTrip = 300 * time.Microsecond
	HopGoalStream    = 0.20
)

// HopExecTrue is trips round trips of `exec true` through each replica,
// interleaved over one keep-alive client each; the medians are compared.
func HopExecTrue(ctx context.Context, hc *http.Client, holder, other *UserPath, trips int) HopMeasure {
	const body = `{"kind":"exec","args":{"command":"true"},"timeoutMs":10000}`
	m := HopMeasure{Work: "`exec true` round trip, HTTP keep-alive", Goal: "forwarded − local ≤ 0.3 ms (p50)"}
	var local, fwd []time.Duration
	for i := 0; i < trips; i++ {
		for _, side := range []struct {
			u  *UserPath
			ds *[]time.Duration
		}{{holder, &local}, {other, &fwd}} {
			t0 := time.Now()
			if _, err := instruct(ctx, hc, side.u, body); err != nil {
				err = fmt.Errorf("trip %d through %s: %v", i+1, side.u.URL, err)
				m.Local.Err, m.Forwarded.Err = err, err
				return m
			}
			*side.ds = append(*side.ds, time.Since(t0))
		}
	}
	m.Local = Result{Time: Quantile(local, 0.5), P99: Quantile(local, 0.99)}
	m.Forwarded = Result{Time: Quantile(fwd, 0.5), P99: Quantile(fwd, 0.99)}
	m.Met = m.Forwarded.Time-m.Local.Time <= HopGoalRoundTrip
	m.Note = fmt.Sprintf("%d trips each, interleaved", trips)
	return m
}

// HopStream reads the NDJSON of `head -c size /dev/zero` through each
// replica, as a line reader does (row 2b of the user's path), with the
// CPU each process spent.
func HopStream(ctx context.Context, hc *http.Client, holder, other *UserPath, replicaPID int, size int64) HopMeasure {
	body := fmt.Sprintf(`{"kind":"execStream","args":{"command":"head -c %d /dev/zero"},"timeoutMs":600000}`, size)
	m := HopMeasure{Work: "HTTP client reading the NDJSON of `head -c N /dev/zero`", Bytes: size,
		Goal: fmt.Sprintf("forwarded ≥ %.0f%% of local's rate", 100*(1-HopGoalStream))}
	run := func(u *UserPath) Result {
		srv, dev, rep, self := TreeCPU(holder.ServerPID()), TreeCPU(holder.ServePID()), TreeCPU(replicaPID), SelfCPU()
		t0 := time.Now()
		n, err := instructRaw(ctx, hc, u, body)
		r := Result{Time: time.Since(t0), Err: err}
		if err == nil && n != size {
			r.Err = fmt.Errorf("wrong result: %d bytes of stdout, not %d", n, size)
		}
		r.CPU = CPU{{"client", SelfCPU() - self}, {"holder", TreeCPU(holder.ServerPID()) - srv},
			{"forwarding replica", TreeCPU(replicaPID) - rep}, {"device", TreeCPU(holder.ServePID()) - dev}}
		return r
	}
	m.Local = run(holder)
	m.Forwarded = run(other)
	if m.Local.Err == nil && m.Forwarded.Err == nil {
		m.Met = m.Local.Time.Seconds()/m.Forwarded.Time.Seconds() >= 1-HopGoalStream
	}
	return m
}

// HopPut is `sema fs put` of the Env's Size random bytes through each
// replica: a streamed write, whose body the forwarding replica sends on
// while the holder's answer comes back. Each copy is checked against the
// source's sha256 and removed.
func HopPut(ctx context.Context, e *Env, other *UserPath) HopMeasure {
	m := HopMeasure{Work: "`sema fs put` of N random bytes", Bytes: e.Size,
		Goal: fmt.Sprintf("forwarded ≥ %.0f%% of local's rate", 100*(1-HopGoalStream))}
	src, err := e.source()
	if err != nil {
		m.Local.Err, m.Forwarded.Err = err, err
		return m
	}
	run := func(u *UserPath) Result {
		dst := filepath.Join(u.Workspace, "put.bin")
		defer os.Remove(dst)
		t0 := time.Now()
		out, err := u.Sema(ctx, "fs", "put", "--timeout", "10m", src, "put.bin").CombinedOutput()
		r := Result{Time: time.Since(t0)}
		if err != nil {
			r.Err = fmt.Errorf("%v: %s", err, tail(out, 300))
		} else {
			r.Err = e.verify(dst)
		}
		return r
	}
	m.Local, m.Forwarded = run(e.U), run(other)
	if m.Local.Err == nil && m.Forwarded.Err == nil {
		m.Met = m.Local.Time.Seconds()/m.Forwarded.Time.Seconds() >= 1-HopGoalStream
	}
	m.Note = "sha256 checked"
	return m
}

// Forwarded reads sema_lane_forwarded_total from the lane at url's
// /metrics: how many device requests it forwarded.
func Forwarded(ctx context.Context, hc *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "sema_lane_forwarded_total "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s/metrics has no sema_lane_forwarded_total", url)
}
