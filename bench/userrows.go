package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// UserRow is one kind of work done through the user's path (the sema
// binaries, or a plain HTTP client) beside its baseline in the same run.
type UserRow struct {
	ID       string
	Work     string // what the lane side runs
	Baseline string // what it is compared with
	Bytes    bool   // a throughput row: Size bytes per run; else a round trip
	Goal     float64
	Run      func(ctx context.Context, e *Env) Measure
}

// UserRows are the user's-path rows, in order.
var UserRows = []UserRow{
	{ID: "1", Work: "`sema run -- head -c N /dev/zero > /dev/null`", Baseline: "`ssh host head -c N /dev/zero > /dev/null`", Bytes: true, Goal: 2, Run: runStdout},
	{ID: "2", Work: "HTTP client reading the NDJSON of `head -c N /dev/zero`", Baseline: "`ssh host head -c N /dev/zero > /dev/null`", Bytes: true, Goal: 2, Run: httpStdout},
	{ID: "2b", Work: "HTTP client reading the NDJSON lines (no JSON decoder, as curl)", Baseline: "`ssh host head -c N /dev/zero > /dev/null`", Bytes: true, Goal: 2, Run: httpRawStdout},
	{ID: "2r", Work: "HTTP client reading the raw stream (Accept: application/vnd.sema.stream)", Baseline: "`ssh host head -c N /dev/zero > /dev/null`", Bytes: true, Goal: 2, Run: httpRawStream},
	{ID: "3", Work: "`sema fs put` of N random bytes", Baseline: "`ssh host 'cat > f && sync f' < file`", Bytes: true, Goal: 2, Run: fsPut},
	{ID: "4", Work: "`sema fs get` of N bytes", Baseline: "`ssh host cat f > local`", Bytes: true, Goal: 2, Run: fsGet},
	{ID: "5", Work: "`exec true` round trip, HTTP keep-alive", Baseline: "local `sh -c true`", Run: execTrue},
	{ID: "6", Work: "MCP `run_command true` through `sema mcp` (stdio)", Baseline: "local `sh -c true`", Run: mcpStdioTrue},
	{ID: "6b", Work: "MCP `run_command true` through `/v1/mcp` (Streamable HTTP)", Baseline: "local `sh -c true`", Run: mcpHTTPTrue},
}

var errNoSSH = errors.New("no ssh")

func (e *Env) sshOr(cmd func() Result) Result {
	if e.SSH == nil {
		return Result{Err: errNoSSH}
	}
	return cmd()
}

func (e *Env) headCommand() string { return fmt.Sprintf("head -c %d /dev/zero", e.Size) }

// sshHead: the ssh baseline of rows 1 and 2, stdout to /dev/null.
func (e *Env) sshHead() Result { return e.ssh(e.SSH.Command(e.headCommand())) }

// Row 1: the CLI's stdout is /dev/null (exec's default), as in the
// shell line; the exit status says whether the command ran to its end
// (a cut stream or a cancel is not 0).
func runStdout(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	lane := e.lane(e.U.Sema(ctx, "run", "--timeout", "10m", "--", "head", "-c", fmt.Sprint(e.Size), "/dev/zero"), true)
	return Measure{Lane: lane, Base: e.sshOr(e.sshHead), Note: "verified by exit status"}
}

// Row 2: a plain Go HTTP client; the bytes it decodes are counted.
func httpStdout(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	var st streamStats
	lane := e.httpRun(func(body string) (n int64, err error) {
		st, err = instructStats(ctx, e.HTTP, e.U, body)
		return st.bytes, err
	})
	note := "bytes counted"
	if st.chunks > 0 {
		avg := st.bytes / st.chunks
		if d := decodeCeiling(e.Size, avg); d > 0 {
			note += fmt.Sprintf("; %d chunks of %d bytes on average (biggest %d); this client's json+base64 decoding alone, from memory: %.0f MB/s",
				st.chunks, avg, st.biggest, float64(e.Size)/d.Seconds()/1e6)
		}
	}
	return Measure{Lane: lane, Base: e.sshOr(e.sshHead), Note: note}
}

// httpRun times one HTTP client reading the stream of `head -c Size
// /dev/zero` (read returns the stdout bytes it counted) with the CPU of
// each process.
func (e *Env) httpRun(read func(body string) (int64, error)) Result {
	body := fmt.Sprintf(`{"kind":"execStream","args":{"command":%q},"timeoutMs":600000}`, e.headCommand())
	srv, dev, self := TreeCPU(e.U.ServerPID()), TreeCPU(e.U.ServePID()), SelfCPU()
	t0 := time.Now()
	n, err := read(body)
	lane := Result{Time: time.Since(t0), Err: err}
	if err == nil && n != e.Size {
		lane.Err = fmt.Errorf("wrong result: %d bytes of stdout, not %d", n, e.Size)
	}
	lane.CPU = CPU{{"client", SelfCPU() - self}, {"server", TreeCPU(e.U.ServerPID()) - srv}, {"device", TreeCPU(e.U.ServePID()) - dev}}
	return lane
}

// Row 2b: the same stream read as lines, without a JSON decoder (curl
// into a pipe reads it so): the door's own rate, apart from the client's.
func httpRawStdout(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	lane := e.httpRun(func(body string) (int64, error) { return instructRaw(ctx, e.HTTP, e.U, body) })
	return Measure{Lane: lane, Base: e.sshOr(e.sshHead), Note: "bytes counted from each line's dataB64"}
}

// Row 2r: the same stream asked for as the raw stream, output as its
// bytes (docs/api.md), over HTTP/1.1, as the sema CLI asks for it.
func httpRawStream(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	lane := e.httpRun(func(body string) (int64, error) { return instructRawStream(ctx, e.HTTP1, e.U, body) })
	return Measure{Lane: lane, Base: e.sshOr(e.sshHead), Note: "bytes counted from the raw stream's stdout frames"}
}

// Row 3: the put lands in the workspace; both copies are checked against
// the source's sha256 and removed. Each side runs twice (abba).
func fsPut(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	src, err := e.source()
	if err != nil {
		return Measure{Lane: Result{Err: err}, Base: Result{Err: err}}
	}
	lane := func() Result {
		dst := filepath.Join(e.U.Workspace, "put.bin")
		if err := e.freePages(e.U.Workspace); err != nil {
			return Result{Err: err}
		}
		r := e.lane(e.U.Sema(ctx, "fs", "put", "--timeout", "10m", src, "put.bin"), true)
		if r.Err == nil {
			r.Err = e.verify(dst)
		}
		os.Remove(dst)
		return r
	}
	base := func() Result {
		return e.sshOr(func() Result {
			f, err := in(src)
			if err != nil {
				return Result{Err: err}
			}
			defer f.Close()
			to := filepath.Join(e.U.Local, "ssh-put.bin")
			if err := e.freePages(e.U.Local); err != nil {
				return Result{Err: err}
			}
			cmd := e.SSH.Command("cat > " + to + " && sync " + to)
			cmd.Stdin = f
			r := e.ssh(cmd)
			if r.Err == nil {
				r.Err = e.verify(to)
			}
			os.Remove(to)
			return r
		})
	}
	l, b := abba(lane, base)
	return Measure{Lane: l, Base: b, Note: "sha256 checked; " + abbaNote}
}

// Row 4: `sema fs get`, or `sema fs cat > local` while the binary has no
// get; both copies are checked against the source's sha256 and removed.
// Each side runs twice (abba).
func fsGet(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	remote, err := e.getSource()
	if err != nil {
		return Measure{Lane: Result{Err: err}, Base: Result{Err: err}}
	}
	note := "sha256 checked; " + abbaNote
	hasGet := e.U.HasFsGet(ctx)
	if !hasGet {
		note = "no `fs get` in this binary: `sema fs cat f > local` instead; " + note
	}
	lane := func() Result {
		local := filepath.Join(e.U.Local, "got.bin")
		if err := e.freePages(e.U.Local); err != nil {
			return Result{Err: err}
		}
		var cmd *exec.Cmd
		var f *os.File
		if hasGet {
			cmd = e.U.Sema(ctx, "fs", "get", "--timeout", "10m", "get.bin", local)
		} else {
			if f, err = out(local); err != nil {
				return Result{Err: err}
			}
			cmd = e.U.Sema(ctx, "fs", "cat", "--timeout", "10m", "get.bin")
			cmd.Stdout = f
		}
		r := e.lane(cmd, false)
		if f != nil {
			f.Close()
		}
		if r.Err == nil {
			r.Err = e.verify(local)
		}
		os.Remove(local)
		return r
	}
	base := func() Result {
		return e.sshOr(func() Result {
			to := filepath.Join(e.U.Local, "ssh-got.bin")
			if err := e.freePages(e.U.Local); err != nil {
				return Result{Err: err}
			}
			f, err := out(to)
			if err != nil {
				return Result{Err: err}
			}
			cmd := e.SSH.Command("cat " + remote)
			cmd.Stdout = f
			r := e.ssh(cmd)
			f.Close()
			if r.Err == nil {
				r.Err = e.verify(to)
			}
			os.Remove(to)
			return r
		})
	}
	l, b := abba(lane, base)
	return Measure{Lane: l, Base: b, Note: note}
}

// abbaNote says how abba measured a row.
const abbaNote = "each side twice, lane, ssh, ssh, lane: the mean"

// abba runs the lane's side, the baseline's, the baseline's again and the
// lane's again, and returns each side's mean: what the machine does to
// whichever side runs first or second (the memory a written file lands
// in, on a virtual machine) falls on both alike.
func abba(lane, base func() Result) (Result, Result) {
	l1 := lane()
	b1 := base()
	b2 := base()
	l2 := lane()
	return meanOf(l1, l2), meanOf(b1, b2)
}

// meanOf is the mean of two runs of one side: their time and each
// process's CPU halved, the first error, the first idle RSS and the
// higher peak.
func meanOf(a, b Result) Result {
	if a.Err != nil {
		return a
	}
	if b.Err != nil {
		return b
	}
	m := Result{Time: (a.Time + b.Time) / 2, RSSIdle: a.RSSIdle, RSSPeak: max(a.RSSPeak, b.RSSPeak)}
	for i, p := range a.CPU {
		if i < len(b.CPU) && b.CPU[i].Name == p.Name {
			m.CPU = append(m.CPU, ProcCPU{p.Name, (p.Time + b.CPU[i].Time) / 2})
		}
	}
	return m
}

// Row 5: Trips round trips of each, interleaved, over one keep-alive
// connection; the medians are compared, p99 shown. ssh true over the
// master is measured in the same loop and named in the note.
func execTrue(ctx context.Context, e *Env) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	const body = `{"kind":"exec","args":{"command":"true"},"timeoutMs":10000}`
	var lane, local, ssh []time.Duration
	for i := 0; i < e.Trips; i++ {
		t0 := time.Now()
		if _, err := instruct(ctx, e.HTTP, e.U, body); err != nil {
			return Measure{Lane: Result{Err: fmt.Errorf("trip %d: %v", i+1, err)}, Base: Result{Err: errors.New("not compared")}}
		}
		lane = append(lane, time.Since(t0))
		t0 = time.Now()
		if err := exec.CommandContext(ctx, "/bin/sh", "-c", "true").Run(); err != nil {
			return Measure{Lane: Result{Err: errors.New("not compared")}, Base: Result{Err: err}}
		}
		local = append(local, time.Since(t0))
		if e.SSH != nil {
			t0 = time.Now()
			if e.SSH.Command("true").Run() == nil {
				ssh = append(ssh, time.Since(t0))
			}
		}
	}
	m := Measure{Lane: Result{Time: Quantile(lane, 0.5), P99: Quantile(lane, 0.99)}, Base: Result{Time: Quantile(local, 0.5), P99: Quantile(local, 0.99)}}
	m.Note = fmt.Sprintf("%d trips", e.Trips)
	if len(ssh) > 0 {
		m.Note += fmt.Sprintf("; `ssh host true` over the master: median %s, p99 %s", ms(Quantile(ssh, 0.5)), ms(Quantile(ssh, 0.99)))
	}
	return m
}

// Quantile is the q-quantile of ds (nearest rank), 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
