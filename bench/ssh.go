package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// sshArgs reach this machine's sshd over loopback without prompts, or nil
// when none answers (then the ssh columns are left out): the connection
// UseSSH set, else the machine's sshd on port 22. The connections are
// multiplexed over one master (ControlMaster), as the lane's are over one
// WebSocket: a run pays for the command, not for a new key exchange (which
// alone takes a few hundred milliseconds here). The master of port 22
// lingers for ten seconds after the last use.
func sshArgs() []string {
	if using != nil {
		return using.Args
	}
	control := filepath.Join(os.TempDir(), "sema-bench-ssh-%C")
	args := []string{"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ControlMaster=auto", "-o", "ControlPath=" + control, "-o", "ControlPersist=10s", "127.0.0.1"}
	if exec.Command("ssh", append(args, "true")...).Run() != nil {
		return nil
	}
	return args
}

// using is the ssh connection of UseSSH.
var using *SSH

// UseSSH makes the ssh pairs go through s (e.g. the runner's throwaway
// sshd); nil goes back to probing port 22. Not safe beside running pairs.
func UseSSH(s *SSH) { using = s }

// SSHAvailable reports whether ssh to 127.0.0.1 works without a prompt.
func SSHAvailable() bool { return sshArgs() != nil }

// SSHTrue: `ssh 127.0.0.1 true` over the multiplexed connection.
func SSHTrue(b *testing.B) {
	args := sshArgs()
	if args == nil {
		b.Skip("no sshd answers on 127.0.0.1")
	}
	for b.Loop() {
		if err := exec.Command("ssh", append(args, "true")...).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// SSHStdout: StreamBytes of stdout over ssh.
func SSHStdout(b *testing.B) {
	args := sshArgs()
	if args == nil {
		b.Skip("no sshd answers on 127.0.0.1")
	}
	b.SetBytes(StreamBytes)
	for b.Loop() {
		cmd := exec.Command("ssh", append(args, fmt.Sprintf("head -c %d /dev/zero", StreamBytes))...)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil || n != StreamBytes {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
}

// SSHWrite: a WriteBytes file piped over ssh into a file that is synced.
func SSHWrite(b *testing.B) {
	args := sshArgs()
	if args == nil {
		b.Skip("no sshd answers on 127.0.0.1")
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(src, randomContent(b, WriteBytes), 0o600); err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(dir, "dst.bin")
	b.SetBytes(WriteBytes)
	b.ResetTimer()
	for b.Loop() {
		in, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("ssh", append(args, "cat > "+dst+" && sync "+dst)...)
		cmd.Stdin = in
		err = cmd.Run()
		in.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}
