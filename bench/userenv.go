package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Env is what the user's-path rows run against, in one invocation.
type Env struct {
	U     *UserPath
	SSH   *SSH // nil: the ssh columns are left out
	Size  int64
	Trips int // round trips of the exec true row
	HTTP  *http.Client
	// HTTP1 is HTTP with HTTP/1.1 only, as the sema CLI's client speaks
	// it over TLS too (row 2r).
	HTTP1 *http.Client
	// made on first use: the random source file and its digest
	src    string
	srcSum [sha256.Size]byte
	getSrc string // the same bytes in the device's workspace
	master int
}

// NewEnv is an Env with a keep-alive HTTP client.
func NewEnv(u *UserPath, s *SSH, size int64, trips int) *Env {
	e := &Env{U: u, SSH: s, Size: size, Trips: trips, HTTP: &http.Client{Transport: u.Transport()}}
	h1 := u.Transport()
	h1.ForceAttemptHTTP2 = false
	h1.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	e.HTTP1 = &http.Client{Transport: h1}
	if s != nil {
		e.master = s.MasterPID()
	}
	return e
}

// Result is one side of one run of a row.
type Result struct {
	Time, P99 time.Duration // P99 for round trips
	Err       error
	CPU       CPU   // where the CPU time went, by process
	RSSIdle   int64 // the sema server's VmRSS before, when sampled
	RSSPeak   int64 // and its peak during the run
}

// Measure is one run of a row: the lane through the user's path and its
// baseline, done one after the other.
type Measure struct {
	Lane, Base Result
	Note       string
}

// source is Size random bytes on the user's side, made once.
func (e *Env) source() (string, error) {
	if e.src != "" {
		return e.src, nil
	}
	path := filepath.Join(e.U.Local, "src.bin")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	var seed [32]byte
	rand.Read(seed[:])
	h := sha256.New()
	_, err = io.CopyN(io.MultiWriter(f, h), mrand.NewChaCha8(seed), e.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	copy(e.srcSum[:], h.Sum(nil))
	e.src = path
	return path, nil
}

// getSource is the source's bytes in the device's workspace, for gets.
func (e *Env) getSource() (string, error) {
	if e.getSrc != "" {
		return e.getSrc, nil
	}
	src, err := e.source()
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.U.Workspace, "get.bin")
	if err := copyFile(src, path); err != nil {
		return "", err
	}
	e.getSrc = path
	return path, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// verify fails unless path holds exactly the source's bytes.
func (e *Env) verify(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("wrong result: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("wrong result: %v", err)
	}
	if n != e.Size || [sha256.Size]byte(h.Sum(nil)) != e.srcSum {
		return fmt.Errorf("wrong result: %d bytes, sha256 differs from the source's", n)
	}
	return nil
}

// lane runs a user command with its stderr kept for the error and says
// where the CPU went (the CLI, the server, the device and its children);
// sample adds the server's VmRSS.
func (e *Env) lane(cmd *exec.Cmd, sample bool) Result {
	errTail := &tailWriter{n: 400}
	cmd.Stderr = errTail
	srv, dev := TreeCPU(e.U.ServerPID()), TreeCPU(e.U.ServePID())
	var r Result
	var s *RSSSampler
	if sample {
		r.RSSIdle = RSS(e.U.ServerPID())
		s = SampleRSS(e.U.ServerPID())
	}
	t0 := time.Now()
	err := cmd.Run()
	r.Time = time.Since(t0)
	if s != nil {
		r.RSSPeak = s.Stop()
	}
	if err != nil {
		r.Err = fmt.Errorf("%v: %s", err, strings.ReplaceAll(errTail.String(), e.U.Local+"/", ""))
	}
	var cli time.Duration
	if ps := cmd.ProcessState; ps != nil {
		cli = ps.UserTime() + ps.SystemTime()
	}
	r.CPU = CPU{{"cli", cli}, {"server", TreeCPU(e.U.ServerPID()) - srv}, {"device", TreeCPU(e.U.ServePID()) - dev}}
	return r
}

// ssh runs an ssh command over the master and says where the CPU went
// (the mux client, the master, the sshd with its sessions).
func (e *Env) ssh(cmd *exec.Cmd) Result {
	errTail := &tailWriter{n: 400}
	cmd.Stderr = errTail
	m, d := TreeCPU(e.master), TreeCPU(e.SSH.SSHDPID())
	var r Result
	t0 := time.Now()
	err := cmd.Run()
	r.Time = time.Since(t0)
	if err != nil {
		r.Err = fmt.Errorf("%v: %s", err, errTail.String())
	}
	var cli time.Duration
	if ps := cmd.ProcessState; ps != nil {
		cli = ps.UserTime() + ps.SystemTime()
	}
	r.CPU = CPU{{"ssh", cli}, {"master", TreeCPU(e.master) - m}}
	if e.SSH.SSHDPID() != 0 {
		r.CPU = append(r.CPU, ProcCPU{"sshd", TreeCPU(e.SSH.SSHDPID()) - d})
	}
	return r
}

// ProcCPU is the CPU time (user and system) one process spent on a run,
// its children included.
type ProcCPU struct {
	Name string
	Time time.Duration
}

// CPU is where a run's CPU time went, by process, in a fixed order.
type CPU []ProcCPU

// String is each process's seconds: "cli 0.61s, server 2.10s, …".
func (c CPU) String() string {
	var parts []string
	for _, p := range c {
		parts = append(parts, p.Name+" "+secs(p.Time))
	}
	return strings.Join(parts, ", ")
}

// PerGiB is each process's CPU-seconds per GiB moved (bytes in the run)
// and their sum: "server 2.10, device 2.40, cli 0.60 (sum 5.10)".
func (c CPU) PerGiB(bytes int64) string {
	if len(c) == 0 || bytes <= 0 {
		return ""
	}
	gib := float64(bytes) / (1 << 30)
	var parts []string
	var sum time.Duration
	for _, p := range c {
		parts = append(parts, fmt.Sprintf("%s %.2f", p.Name, p.Time.Seconds()/gib))
		sum += p.Time
	}
	return fmt.Sprintf("%s (sum %.2f)", strings.Join(parts, ", "), sum.Seconds()/gib)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// tailWriter keeps the last n bytes written (a command's stderr).
type tailWriter struct {
	n int
	b []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > w.n {
		w.b = w.b[len(w.b)-w.n:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	return strings.Join(strings.Fields(string(w.b)), " ")
}

// in opens path as a command's stdin; out creates path as its stdout.
func in(path string) (*os.File, error)  { return os.Open(path) }
func out(path string) (*os.File, error) { return os.Create(path) }

// within bounds a row's command.
func within(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 20*time.Minute)
}

// freePages writes e.Size bytes to a scratch file in dir and removes it,
// so that the side measured next writes its file into memory the kernel
// has just freed, as the side before it did. Without it the side that
// runs first pays for both: on a virtual machine that hands freed memory
// back to its host (free page reporting), touching such memory again
// costs about 2.5 s of system time per GiB, against 0.2 s for pages freed
// a moment ago (`dd` of 1 GiB, each file kept, then each removed, on this
// project's VM).
func (e *Env) freePages(dir string) error {
	f, err := os.CreateTemp(dir, ".pages-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	buf := make([]byte, 1<<20)
	for left := e.Size; left > 0 && err == nil; left -= int64(len(buf)) {
		_, err = f.Write(buf[:min(left, int64(len(buf)))])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
