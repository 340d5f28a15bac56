package bench

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// SSH is a way to reach this machine over ssh on loopback without a
// prompt, multiplexed over one master connection (ControlMaster), as the
// lane's traffic is over one WebSocket: a run pays for the command, not for
// a key exchange.
type SSH struct {
	// Args go before the remote command: `ssh Args... COMMAND`.
	Args []string
	// Cipher is what the client and server negotiated (from `ssh -v`), with
	// both sides' defaults left alone.
	Cipher string
	// Own says the sshd is the runner's throwaway one, not the machine's.
	Own     bool
	sshd    *exec.Cmd
	control string
	dir     string
}

// SSHDPath is where the throwaway sshd is looked for.
const SSHDPath = "/usr/sbin/sshd"

// ErrNoSSHD says why the ssh column is left out, and how to get sshd.
var ErrNoSSHD = errors.New("no sshd answers on 127.0.0.1 and " + SSHDPath + " is missing (Debian/Ubuntu: apt-get install -y openssh-server; the runner starts its own on a free port, the system one need not run)")

// OpenSSH reaches 127.0.0.1 over ssh: the machine's sshd on port 22 when
// it lets this user in without a prompt, else a throwaway sshd started
// from SSHDPath on a free loopback port with a fresh host key and a fresh
// client key, all in a temp dir that Close removes.
func OpenSSH() (*SSH, error) {
	dir, err := os.MkdirTemp("", "sema-bench-ssh-")
	if err != nil {
		return nil, err
	}
	s := &SSH{dir: dir, control: filepath.Join(dir, "mux")}
	base := []string{"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"}
	s.Args = append(base, s.mux()...)
	s.Args = append(s.Args, "127.0.0.1")
	if s.answers() {
		return s, s.findCipher(base, "127.0.0.1")
	}
	if _, err := os.Stat(SSHDPath); err != nil {
		os.RemoveAll(dir)
		return nil, ErrNoSSHD
	}
	port, err := s.startSSHD()
	if err != nil {
		s.Close()
		return nil, err
	}
	own := append(base, "-i", filepath.Join(dir, "id_ed25519"), "-o", "IdentitiesOnly=yes", "-p", port)
	s.Args = append(append(own, s.mux()...), "127.0.0.1")
	s.Own = true
	deadline := time.Now().Add(15 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			s.Close()
			return nil, fmt.Errorf("the throwaway sshd never let us in: %s", tail(log, 600))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s, s.findCipher(own, "127.0.0.1")
}

// mux: one master for every command, kept until Close.
func (s *SSH) mux() []string {
	return []string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + s.control, "-o", "ControlPersist=yes"}
}

func (s *SSH) answers() bool {
	return exec.Command("ssh", append(s.Args, "true")...).Run() == nil
}

// Command is `ssh ... remote` over the master.
func (s *SSH) Command(remote string) *exec.Cmd {
	return exec.Command("ssh", append(append([]string{}, s.Args...), remote)...)
}

var kexCipher = regexp.MustCompile(`kex: server->client cipher: (\S+)`)

// findCipher opens one connection of its own (not the master) with -v and
// reads what was negotiated.
func (s *SSH) findCipher(args []string, host string) error {
	out, _ := exec.Command("ssh", append(append([]string{"-v", "-o", "ControlPath=none"}, args...), host, "true")...).CombinedOutput()
	if m := kexCipher.FindSubmatch(out); m != nil {
		s.Cipher = string(m[1])
		return nil
	}
	s.Cipher = "unknown"
	return nil
}

// MasterPID is the pid of the multiplexing master, or 0.
func (s *SSH) MasterPID() int {
	out, _ := exec.Command("ssh", "-o", "ControlPath="+s.control, "-O", "check", "127.0.0.1").CombinedOutput()
	var pid int
	if m := regexp.MustCompile(`pid=(\d+)`).FindSubmatch(out); m != nil {
		fmt.Sscan(string(m[1]), &pid)
	}
	return pid
}

// SSHDPID is the pid of the throwaway sshd (0 for the machine's own).
func (s *SSH) SSHDPID() int {
	if s.sshd == nil {
		return 0
	}
	return s.sshd.Process.Pid
}

func (s *SSH) startSSHD() (string, error) {
	for _, k := range []string{"host_ed25519", "id_ed25519"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sema-bench", "-f", filepath.Join(s.dir, k)).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(s.dir, "id_ed25519.pub"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), pub, 0o600); err != nil {
		return "", err
	}
	// sshd wants its privilege separation dir; as root the runner may make it.
	if os.Geteuid() == 0 {
		os.MkdirAll("/run/sshd", 0o755)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	conf := filepath.Join(s.dir, "sshd_config")
	text := strings.Join([]string{
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(s.dir, "host_ed25519"),
		"AuthorizedKeysFile " + filepath.Join(s.dir, "authorized_keys"),
		"PidFile none", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
		"KbdInteractiveAuthentication no", "PubkeyAuthentication yes", "PermitRootLogin prohibit-password",
		"PrintMotd no",
		// bash started by sshd sources ~/.bashrc (Debian builds it with
		// SSH_SOURCE_BASHRC) unless it is a nested shell: a user's rc file
		// (here root's runs `pyenv init`, ~300 ms) is not ssh's cost, and
		// the lane's device runs /bin/sh -c with no rc file either.
		"SetEnv SHLVL=1", "",
	}, "\n")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return "", err
	}
	log, err := os.Create(filepath.Join(s.dir, "sshd.log"))
	if err != nil {
		return "", err
	}
	defer log.Close()
	s.sshd = exec.Command(SSHDPath, "-D", "-e", "-f", conf, "-p", port)
	s.sshd.Stdout, s.sshd.Stderr = log, log
	if err := s.sshd.Start(); err != nil {
		s.sshd = nil
		return "", fmt.Errorf("%s: %v", SSHDPath, err)
	}
	return port, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// Close ends the master and the throwaway sshd and removes the temp dir.
func (s *SSH) Close() {
	exec.Command("ssh", "-o", "ControlPath="+s.control, "-O", "exit", "127.0.0.1").Run()
	if s.sshd != nil {
		stop(s.sshd, 5*time.Second)
		s.sshd = nil
	}
	os.RemoveAll(s.dir)
}

// stop sends SIGTERM and waits; SIGKILL after grace.
func stop(cmd *exec.Cmd, grace time.Duration) error {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		cmd.Process.Kill()
		return <-done
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
