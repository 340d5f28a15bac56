package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// UserPath is the lane as a user meets it: the `sema` binary built once,
// a `sema server` child process on loopback with its own data dir, and a
// device enrolled with `sema token` + `sema device enroll` and served by a
// `sema device serve` child process, all in one temp dir that Close
// removes.
type UserPath struct {
	Bin       string // the built sema binary
	URL, Key  string // the server's base URL and the admin API key
	DeviceID  string
	Workspace string // the device's workspace root
	Local     string // the user's side: files the CLI reads and writes
	Postgres  string // the registry's PostgreSQL URL; "": SQLite in the data dir
	// CertFile is the server's self-signed certificate when it serves
	// HTTPS (StartUserPathTLS), which the executor, the CLI and the
	// runner's HTTP clients trust; "": plain HTTP.
	CertFile string
	keyFile  string
	http     *http.Client // online's
	dir      string
	server   *exec.Cmd
	serve    *exec.Cmd
	replicas []*Replica
}

// Replica is one more `sema server` on the same PostgreSQL registry as
// the UserPath's server: the device is not connected to it, so
// what it is asked of the device it forwards to the server that holds it.
type Replica struct {
	URL string
	cmd *exec.Cmd
}

// PID is the replica process's pid.
func (r *Replica) PID() int { return r.cmd.Process.Pid }

// ModuleRoot is the directory of the go.mod `go` sees from the current
// directory: the sema module when the runner runs inside it.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("bench: run from inside the sema module (go env GOMOD: %q, %v)", mod, err)
	}
	return filepath.Dir(mod), nil
}

// StartUserPath builds the binary, starts the server and the device and
// waits until the device is online.
func StartUserPath(ctx context.Context) (*UserPath, error) { return StartUserPathOn(ctx, "") }

// StartUserPathOn is StartUserPath with the registry on the PostgreSQL at
// postgresURL ("" for SQLite): the server is then a replica of a cluster,
// and StartReplica adds others.
func StartUserPathOn(ctx context.Context, postgresURL string) (*UserPath, error) {
	return startUserPath(ctx, postgresURL, "", false)
}

// StartUserPathTLS is StartUserPath with the server on HTTPS
// (--tls-cert/--tls-key, a throwaway self-signed certificate): the
// executor dials wss:// and the CLI https://, both trusting the
// certificate through SSL_CERT_FILE, as a deployment with a private CA.
func StartUserPathTLS(ctx context.Context) (*UserPath, error) {
	return startUserPath(ctx, "", "", true)
}

// ExtraServerFlags are flags every `sema server` started after they are
// set is given (bench/ratios -server-flag), to measure a setting.
var ExtraServerFlags []string

// StartUserPathTagged is StartUserPath with sema built with the build tags
// tags (bench/stages: semaprobe).
func StartUserPathTagged(ctx context.Context, tags string) (*UserPath, error) {
	return startUserPath(ctx, "", tags, false)
}

func startUserPath(ctx context.Context, postgresURL, tags string, tls bool) (*UserPath, error) {
	dir, err := os.MkdirTemp("", "sema-userpath-")
	if err != nil {
		return nil, err
	}
	u := &UserPath{dir: dir, Bin: filepath.Join(dir, "sema"), Workspace: filepath.Join(dir, "workspace"), Local: filepath.Join(dir, "local"), Postgres: postgresURL}
	fail := func(err error) (*UserPath, error) { u.Close(); return nil, err }
	for _, d := range []string{u.Workspace, u.Local, filepath.Join(dir, "tmp-cli"), filepath.Join(dir, "tmp-device")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fail(err)
		}
	}
	if tls {
		if u.CertFile, u.keyFile, err = writeSelfSigned(dir); err != nil {
			return fail(err)
		}
	}
	u.http = &http.Client{Transport: trusting(u.CertFile)}
	root, err := ModuleRoot()
	if err != nil {
		return fail(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", u.Bin, "./cmd/sema")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("go build ./cmd/sema: %v: %s", err, out))
	}
	if err := u.startServer(); err != nil {
		return fail(err)
	}
	if err := u.enrollAndServe(ctx); err != nil {
		return fail(err)
	}
	return u, nil
}

var listening = regexp.MustCompile(`msg="lane listening" url=(\S+)`)

func (u *UserPath) startServer() error {
	cmd, url, key, err := u.startLane("server", u.DataDir(), true)
	if err != nil {
		return err
	}
	u.server, u.URL, u.Key = cmd, url, key
	return nil
}

// StartReplica starts another `sema server` on the UserPath's PostgreSQL
// registry, with a data dir of its own, and waits until it listens.
func (u *UserPath) StartReplica() (*Replica, error) {
	if u.Postgres == "" {
		return nil, errors.New("bench: a replica needs the registry on PostgreSQL (StartUserPathOn)")
	}
	name := fmt.Sprintf("replica%d", len(u.replicas)+1)
	cmd, url, _, err := u.startLane(name, filepath.Join(u.dir, name), false)
	if err != nil {
		return nil, err
	}
	r := &Replica{URL: url, cmd: cmd}
	u.replicas = append(u.replicas, r)
	return r, nil
}

// Via is the same user and device through the lane at url (a replica).
func (u *UserPath) Via(url string) *UserPath {
	v := *u
	v.URL = url
	return &v
}

// startLane starts a `sema server` on loopback with its data in data (and
// its registry on u.Postgres when set) and waits until it listens; first:
// the registry's first start, which writes the admin key into data, and
// also waits for that key.
func (u *UserPath) startLane(name, data string, first bool) (cmd *exec.Cmd, url, key string, err error) {
	var env []string
	if u.Postgres != "" {
		env = append(env, "SEMA_POSTGRES_URL="+u.Postgres) // out of the process list
	}
	args := []string{"server", "--listen", "127.0.0.1:0", "--data", data}
	if u.CertFile != "" {
		args = append(args, "--tls-cert", u.CertFile, "--tls-key", u.keyFile)
	}
	args = append(args, ExtraServerFlags...)
	cmd, logPath, err := u.startChild(name, env, args...)
	if err != nil {
		return nil, "", "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		k, kerr := os.ReadFile(filepath.Join(data, "admin.key"))
		if m := listening.FindSubmatch(log); m != nil && (kerr == nil || !first) {
			return cmd, string(m[1]), strings.TrimSpace(string(k)), nil
		}
		if time.Now().After(deadline) || exited(cmd) {
			stop(cmd, 5*time.Second)
			return nil, "", "", fmt.Errorf("sema %s did not start: %s", name, tail(log, 600))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startChild starts a long-lived sema child with its stderr (and stdout)
// in DIR/NAME.log.
func (u *UserPath) startChild(name string, env []string, args ...string) (*exec.Cmd, string, error) {
	return u.startChildOf(u.Bin, name, env, args...)
}

// startChildOf is startChild with another binary.
func (u *UserPath) startChildOf(bin, name string, env []string, args ...string) (*exec.Cmd, string, error) {
	logPath := filepath.Join(u.dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(u.environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("sema %s: %v", name, err)
	}
	return cmd, logPath, nil
}

// exited reports whether cmd has ended (without reaping it: a zombie
// has ended too).
func exited(cmd *exec.Cmd) bool {
	st, err := readStat(cmd.Process.Pid)
	return err != nil || st.state == 'Z' || st.state == 'X'
}

func (u *UserPath) enrollAndServe(ctx context.Context) error {
	var out, errOut bytes.Buffer
	tok := u.Sema(ctx, "token", "--workspace", u.Workspace)
	tok.Stdout, tok.Stderr = &out, &errOut
	if err := tok.Run(); err != nil {
		return fmt.Errorf("sema token: %v: %s", err, errOut.String())
	}
	line := strings.Fields(out.String())
	if len(line) < 3 || line[0] != "sema" {
		return fmt.Errorf("sema token printed %q, not an enroll line", out.String())
	}
	state := filepath.Join(u.dir, "device")
	out.Reset()
	errOut.Reset()
	enroll := u.Sema(ctx, append(line[1:], "--state-dir", state)...)
	enroll.Stdout, enroll.Stderr = &out, &errOut
	if err := enroll.Run(); err != nil {
		return fmt.Errorf("sema device enroll: %v: %s", err, errOut.String())
	}
	u.DeviceID = strings.TrimSpace(out.String())
	return u.startServe(ctx)
}

// startServe starts `sema device serve` with flags on the enrolled state
// dir and waits until the device is online.
func (u *UserPath) startServe(ctx context.Context, flags ...string) error {
	return u.startServeWith(ctx, u.Bin, flags...)
}

// startServeWith is startServe with the serve of the sema binary bin.
func (u *UserPath) startServeWith(ctx context.Context, bin string, flags ...string) error {
	args := append([]string{"device", "serve", "--state-dir", filepath.Join(u.dir, "device")}, flags...)
	serve, logPath, err := u.startChildOf(bin, "serve", []string{"TMPDIR=" + filepath.Join(u.dir, "tmp-device")}, args...)
	if err != nil {
		return err
	}
	u.serve = serve
	deadline := time.Now().Add(30 * time.Second)
	for !u.online(ctx) {
		if time.Now().After(deadline) || exited(serve) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("the device never came online: %s", tail(log, 600))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// RestartServe stops the device's `sema device serve` (SIGTERM, wait) and
// starts it again with flags, as a user restarting it with other flags.
func (u *UserPath) RestartServe(ctx context.Context, flags ...string) error {
	return u.RestartServeWith(ctx, u.Bin, flags...)
}

// RestartServeWith is RestartServe with the serve of another sema binary
// (an older build, to compare with).
func (u *UserPath) RestartServeWith(ctx context.Context, bin string, flags ...string) error {
	if u.serve != nil {
		stop(u.serve, 40*time.Second)
		u.serve = nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for u.online(ctx) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the lane notices the goodbye
	}
	return u.startServeWith(ctx, bin, flags...)
}

// online asks GET /v1/devices, as `sema devices` does.
func (u *UserPath) online(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.URL+"/v1/devices", nil)
	req.Header.Set("Authorization", "Bearer "+u.Key)
	resp, err := u.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var out struct {
		Devices []struct {
			DeviceID string `json:"deviceId"`
			Online   bool   `json:"online"`
		} `json:"devices"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return false
	}
	for _, d := range out.Devices {
		if d.DeviceID == u.DeviceID {
			return d.Online
		}
	}
	return false
}

// Sema is a user command: the binary with SEMA_SERVER, SEMA_API_KEY and
// SEMA_DEVICE set, its own TMPDIR, and stdout/stderr left to the caller.
func (u *UserPath) Sema(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, u.Bin, args...)
	cmd.Env = append(u.environ(), "SEMA_SERVER="+u.URL, "SEMA_API_KEY="+u.Key, "SEMA_DEVICE="+u.DeviceID,
		"TMPDIR="+filepath.Join(u.dir, "tmp-cli"))
	return cmd
}

// environ is this process's environment, with SSL_CERT_FILE naming the
// server's certificate when it serves HTTPS.
func (u *UserPath) environ() []string {
	if u.CertFile == "" {
		return os.Environ()
	}
	return append(os.Environ(), "SSL_CERT_FILE="+u.CertFile)
}

// Transport is an HTTP transport with keep-alive that trusts the server's
// certificate when it serves HTTPS.
func (u *UserPath) Transport() *http.Transport { return trusting(u.CertFile) }

// DataDir is the server's data dir (its SQLite registry).
func (u *UserPath) DataDir() string { return filepath.Join(u.dir, "data") }

// ServerPID and ServePID are the children's pids.
func (u *UserPath) ServerPID() int { return u.server.Process.Pid }
func (u *UserPath) ServePID() int  { return u.serve.Process.Pid }

// HasFsGet reports whether this binary has `sema fs get` (its help names
// the verb; cobra answers an unknown verb's --help with the parent's help
// and exit 0, so the exit status alone does not tell).
func (u *UserPath) HasFsGet(ctx context.Context) bool {
	out, err := u.Sema(ctx, "fs", "get", "--help").CombinedOutput()
	return err == nil && bytes.Contains(out, []byte("sema fs get"))
}

// Close stops the device, then the replicas and the server (SIGTERM,
// wait) and removes the temp dir.
func (u *UserPath) Close() {
	cmds := []*exec.Cmd{u.serve}
	for _, r := range u.replicas {
		cmds = append(cmds, r.cmd)
	}
	for _, c := range append(cmds, u.server) {
		if c != nil {
			stop(c, 40*time.Second)
		}
	}
	u.serve, u.server, u.replicas = nil, nil, nil
	os.RemoveAll(u.dir)
}
